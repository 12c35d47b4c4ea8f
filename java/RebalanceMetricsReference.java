import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.metrics.stats.Avg;
import org.apache.kafka.common.metrics.stats.CumulativeCount;
import org.apache.kafka.common.metrics.stats.CumulativeSum;
import org.apache.kafka.common.metrics.stats.Max;
import org.apache.kafka.common.metrics.stats.Rate;
import org.apache.kafka.common.metrics.stats.WindowedCount;
import org.apache.kafka.common.utils.Time;

/**
 * Kafka's own metric stats as the reference for kassign.telemetry.stats.
 *
 * Builds sensors shaped like the consumer's rebalance sensors (avg, max, cumulative sum and count,
 * hourly windowed rate) on a settable clock and reads commands from stdin:
 *   record SENSOR VALUE TIME_MS     measure SENSOR TIME_MS
 * Each measure prints "avg max total count rate" (NaN as "NaN").
 */
public class RebalanceMetricsReference {
    static final class SettableTime implements Time {
        long nowMs;
        public long milliseconds() { return nowMs; }
        public long nanoseconds() { return TimeUnit.MILLISECONDS.toNanos(nowMs); }
        public void sleep(long ms) { nowMs += ms; }
        public void waitObject(Object obj, java.util.function.Supplier<Boolean> condition, long deadlineMs) {
            throw new UnsupportedOperationException();
        }
    }

    public static void main(String[] args) throws Exception {
        SettableTime time = new SettableTime();
        Metrics metrics = new Metrics(new MetricConfig(), java.util.Collections.emptyList(), time);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split("\\s+");
            if (f.length < 3) continue;
            String sensorName = f[1];
            Sensor sensor = metrics.getSensor(sensorName);
            if (sensor == null) {
                sensor = metrics.sensor(sensorName);
                sensor.add(name(metrics, sensorName, "avg"), new Avg());
                sensor.add(name(metrics, sensorName, "max"), new Max());
                sensor.add(name(metrics, sensorName, "total"), new CumulativeSum());
                sensor.add(name(metrics, sensorName, "count"), new CumulativeCount());
                sensor.add(name(metrics, sensorName, "rate"), new Rate(TimeUnit.HOURS, new WindowedCount()));
            }
            if (f[0].equals("record")) {
                long t = Long.parseLong(f[3]);
                time.nowMs = t;
                sensor.record(Double.parseDouble(f[2]), t);
            } else if (f[0].equals("measure")) {
                time.nowMs = Long.parseLong(f[2]);
                StringBuilder out = new StringBuilder();
                for (String stat : new String[] {"avg", "max", "total", "count", "rate"}) {
                    KafkaMetric m = metrics.metric(name(metrics, sensorName, stat));
                    double v = (Double) m.metricValue();
                    out.append(String.format(Locale.ROOT, "%s ", Double.isNaN(v) ? "NaN" : Double.toString(v)));
                }
                System.out.println(out.toString().trim());
            }
        }
        System.out.flush();
    }

    static MetricName name(Metrics metrics, String sensor, String stat) {
        return metrics.metricName(sensor + "-" + stat, "reference");
    }
}
