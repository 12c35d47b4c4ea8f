import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One Java consumer-group member for kassign's group driver (integration/driver.py).
 *
 * Prints its rebalance callbacks, positions and processed offset ranges as JSON lines on stdout in
 * kassign's timeline schema (kassign/timeline/events.py). Partitions are written as "topic:partition".
 * Closing stdin closes the consumer cleanly (LeaveGroup); killing the process is a crash.
 *
 * Usage: JavaMember --bootstrap B --group G --topics T1[,T2] --id M --strategy S[,S2]
 *        [--session-ms 1500] [--heartbeat-ms 250] [--max-poll-ms 30000] [--rack R] [--progress-ms 1000]
 *        [--process-ms MS|LO,HI] [--seed N] [--instance-id I] [--hold]
 *        [--group-protocol classic|consumer] [--remote-assignor uniform|range] [--commit-every-batch]
 * --process-ms: work per non-empty poll batch (uniform in LO..HI, seeded by --seed and the id);
 * --hold: print a "ready" event and subscribe only when a line "go" arrives on stdin.
 * --group-protocol consumer (kafka-clients 4.x): KIP-848's protocol; --strategy, --session-ms and
 * --heartbeat-ms are then not used (the broker assigns and sets both), --remote-assignor picks its assignor.
 * --commit-every-batch: commitSync after every non-empty batch (after its processing) instead of
 * commitAsync every --progress-ms, and report every commit as "commit" (or "commit_err" with "error")
 * with "parts", "began" (unix seconds), "lat" (ms) and "why" (batch, revoke, close, background), as
 * integration/members/aiokafka_member.py does.
 * Strategies: range, roundrobin, sticky, cooperative-sticky (or a fully qualified class name).
 */
public class JavaMember {
    private static final Comparator<TopicPartition> TP_ORDER =
            Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

    private final String id;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final AtomicBoolean stopping = new AtomicBoolean(false);
    private final CountDownLatch go = new CountDownLatch(1);
    private long processLoMs = 0, processHiMs = 0;
    private boolean commitEveryBatch = false;
    private Random processRng = new Random(0);
    // Processed-but-unreported offset ranges and the next offset to commit, per partition.
    private final Map<TopicPartition, List<long[]>> pendingRanges = new HashMap<>();
    private final Map<TopicPartition, Long> processedUpTo = new HashMap<>();

    JavaMember(String id, Properties props) {
        this.id = id;
        this.consumer = new KafkaConsumer<>(props);
    }

    private static String strategyClass(String name) {
        switch (name) {
            case "range": return "org.apache.kafka.clients.consumer.RangeAssignor";
            case "roundrobin": return "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            case "sticky": return "org.apache.kafka.clients.consumer.StickyAssignor";
            case "cooperative-sticky": return "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            default:
                if (name.contains(".")) return name;
                throw new IllegalArgumentException("unknown assignment strategy: " + name);
        }
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    private static String tp(TopicPartition p) {
        return quote(p.topic() + ":" + p.partition());
    }

    private static String parts(Collection<TopicPartition> partitions) {
        List<String> items = new ArrayList<>();
        partitions.stream().sorted(TP_ORDER).forEach(p -> items.add(tp(p)));
        return "[" + String.join(",", items) + "]";
    }

    /** Print one event; synchronized because commit callbacks may print from another thread. */
    private synchronized void emit(String ev, String rest) {
        // Microseconds: a millisecond clock stamps an event up to 1 ms early, before the instant the
        // harness recorded for the request that caused it.
        Instant now = Instant.now();
        double t = now.getEpochSecond() + now.getNano() / 1e9;
        String line = "{\"id\":" + quote(id) + ",\"t\":" + String.format("%.6f", t) + ",\"ev\":" + quote(ev)
                + (rest.isEmpty() ? "" : "," + rest) + "}";
        System.out.println(line);
        System.out.flush();
    }

    private int generation() {
        try {
            return consumer.groupMetadata().generationId();
        } catch (RuntimeException e) {
            return -1;
        }
    }

    private void record(ConsumerRecord<byte[], byte[]> r) {
        TopicPartition p = new TopicPartition(r.topic(), r.partition());
        List<long[]> ranges = pendingRanges.computeIfAbsent(p, k -> new ArrayList<>());
        long[] last = ranges.isEmpty() ? null : ranges.get(ranges.size() - 1);
        if (last != null && last[1] + 1 == r.offset()) last[1] = r.offset();
        else ranges.add(new long[] {r.offset(), r.offset()});
        processedUpTo.put(p, r.offset() + 1);
    }

    /** Report processed ranges of the given partitions (all when null) before their offsets are committed. */
    private void reportProcessed(Collection<TopicPartition> only) {
        List<String> items = new ArrayList<>();
        Map<TopicPartition, List<long[]>> sorted = new TreeMap<>(TP_ORDER);
        sorted.putAll(pendingRanges);
        for (Map.Entry<TopicPartition, List<long[]>> e : sorted.entrySet()) {
            if (only != null && !only.contains(e.getKey())) continue;
            List<String> rs = new ArrayList<>();
            for (long[] r : e.getValue()) rs.add("[" + r[0] + "," + r[1] + "]");
            items.add(tp(e.getKey()) + ":[" + String.join(",", rs) + "]");
        }
        if (only == null) pendingRanges.clear();
        else only.forEach(pendingRanges::remove);
        if (!items.isEmpty()) emit("processed", "\"ranges\":{" + String.join(",", items) + "}");
    }

    private Map<TopicPartition, OffsetAndMetadata> commitable(Collection<TopicPartition> only) {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        for (Map.Entry<TopicPartition, Long> e : processedUpTo.entrySet()) {
            if (only == null || only.contains(e.getKey())) out.put(e.getKey(), new OffsetAndMetadata(e.getValue()));
        }
        return out;
    }

    private static double now() {
        Instant i = Instant.now();
        return i.getEpochSecond() + i.getNano() / 1e9;
    }

    /** The fields every commit report carries: what was committed, when it was issued, how long it took, why. */
    private static String commitFields(Collection<TopicPartition> committed, double began, String why) {
        return "\"parts\":" + parts(committed) + ",\"began\":" + String.format("%.6f", began)
                + ",\"lat\":" + String.format("%.3f", (now() - began) * 1000) + ",\"why\":" + quote(why);
    }

    /** commitSync, reported: a failure always (commit_err), a success with --commit-every-batch (commit). */
    private void timedCommitSync(Map<TopicPartition, OffsetAndMetadata> offsets, String why) {
        if (offsets.isEmpty()) return;
        double began = now();
        try {
            consumer.commitSync(offsets);
        } catch (RuntimeException e) {
            if (e instanceof WakeupException) throw e;  // stdin closed: the poll loop's clean close
            emit("commit_err", commitFields(offsets.keySet(), began, why) + ",\"error\":"
                    + quote(e.getClass().getSimpleName()));
            return;
        }
        if (commitEveryBatch) emit("commit", commitFields(offsets.keySet(), began, why));
    }

    private void reportProgress() {
        List<String> items = new ArrayList<>();
        for (TopicPartition p : consumer.assignment()) {
            try {
                items.add(tp(p) + ":" + consumer.position(p, Duration.ofMillis(200)));
            } catch (RuntimeException e) {
                // position unknown right after assignment: leave the partition out of this report
            }
        }
        emit("progress", "\"pos\":{" + String.join(",", items) + "}");
    }

    private final ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            emit("cb_revoked", "\"parts\":" + parts(partitions) + ",\"gen\":" + generation());
            reportProcessed(partitions);
            try {
                timedCommitSync(commitable(partitions), "revoke");
            } catch (WakeupException e) {
                // stdin closed meanwhile: the partitions are given up uncommitted, as before
                emit("commit_err", "\"parts\":" + parts(partitions) + ",\"error\":\"WakeupException\",\"why\":\"revoke\"");
            }
            partitions.forEach(processedUpTo::remove);
            emit("cb_revoked_done", "");
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            emit("cb_lost", "\"parts\":" + parts(partitions) + ",\"gen\":" + generation());
            reportProcessed(partitions);
            partitions.forEach(processedUpTo::remove);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            emit("cb_assigned", "\"parts\":" + parts(partitions) + ",\"gen\":" + generation());
        }
    };

    void run(List<String> topics, long progressMs, boolean hold) {
        if (hold) {
            // A replacement made ready before its predecessor goes: only the group protocol is timed.
            emit("ready", "");
            try {
                go.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (stopping.get()) {
                consumer.close(Duration.ofSeconds(10));
                return;
            }
        }
        consumer.subscribe(topics, listener);
        emit("subscribed", "\"topics\":[" + String.join(",", topics.stream().map(JavaMember::quote).toList()) + "]");
        long nextTick = System.currentTimeMillis() + progressMs;
        try {
            while (!stopping.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> r : records) record(r);
                if (!records.isEmpty() && processHiMs > 0) {
                    // the application's work on this batch: a rebalance is noticed at the next poll
                    long ms = processLoMs + (long) (processRng.nextDouble() * (processHiMs - processLoMs));
                    try {
                        Thread.sleep(ms);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                if (!records.isEmpty() && commitEveryBatch) {
                    // what most applications do: commit the batch synchronously once it is processed
                    reportProcessed(null);
                    timedCommitSync(commitable(null), "batch");
                }
                if (System.currentTimeMillis() >= nextTick) {
                    nextTick += progressMs;
                    reportProgress();
                    if (!commitEveryBatch) {
                        reportProcessed(null);
                        Map<TopicPartition, OffsetAndMetadata> offsets = commitable(null);
                        if (!offsets.isEmpty()) {
                            double began = now();
                            consumer.commitAsync(offsets, (o, e) -> {
                                if (e != null) emit("commit_err", commitFields(offsets.keySet(), began, "background")
                                        + ",\"error\":" + quote(e.getClass().getSimpleName()));
                            });
                        }
                    }
                }
            }
        } catch (WakeupException e) {
            // stdin closed: fall through to a clean close
        }
        reportClientMetrics();
        emit("closing", "");
        reportProcessed(null);
        try {
            timedCommitSync(commitable(null), "close");
        } catch (WakeupException e) {
            emit("commit_err", "\"error\":\"WakeupException\",\"why\":\"close\"");
        }
        consumer.close(Duration.ofSeconds(10));
        emit("closed", "");
    }

    /** The consumer's own rebalance metrics (group consumer-coordinator-metrics), as kassign's
     *  telemetry computes them from the callbacks: the reference for that inference. */
    private void reportClientMetrics() {
        List<String> items = new ArrayList<>();
        for (Map.Entry<MetricName, ? extends Metric> e : consumer.metrics().entrySet()) {
            MetricName name = e.getKey();
            if (!name.group().equals("consumer-coordinator-metrics")) continue;
            Object value = e.getValue().metricValue();
            if (value instanceof Number n && Double.isFinite(n.doubleValue())) {
                items.add(quote(name.name()) + ":" + n.doubleValue());
            }
        }
        emit("client_metrics", "\"metrics\":{" + String.join(",", items) + "}");
    }

    void watchStdin() {
        Thread t = new Thread(() -> {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            try {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("go")) go.countDown();  // other input is ignored
                }
            } catch (IOException e) {
                // a broken stdin means the driver is gone: stop as on end-of-file
            }
            stopping.set(true);
            go.countDown();
            consumer.wakeup();
        }, "stdin-watcher");
        t.setDaemon(true);
        t.start();
    }

    public static void main(String[] args) {
        Map<String, String> opt = new HashMap<>();
        boolean hold = false;
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--")) throw new IllegalArgumentException("expected --option, got " + args[i]);
            if (args[i].equals("--hold")) {
                hold = true;
                i -= 1;  // a flag without a value
                continue;
            }
            if (args[i].equals("--commit-every-batch")) {
                opt.put("commit-every-batch", "true");
                i -= 1;  // a flag without a value
                continue;
            }
            if (i + 1 >= args.length) throw new IllegalArgumentException("missing value of " + args[i]);
            opt.put(args[i].substring(2), args[i + 1]);
        }
        for (String required : List.of("bootstrap", "group", "topics", "id", "strategy")) {
            if (!opt.containsKey(required)) throw new IllegalArgumentException("missing --" + required);
        }
        List<String> strategies = new ArrayList<>();
        for (String s : opt.get("strategy").split(",")) strategies.add(strategyClass(s.trim()));

        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, opt.get("bootstrap"));
        props.put(ConsumerConfig.GROUP_ID_CONFIG, opt.get("group"));
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, opt.get("id"));
        String groupProtocol = opt.getOrDefault("group-protocol", "classic");
        if (groupProtocol.equals("consumer")) {
            // KIP-848: the broker assigns and owns the session timeout and heartbeat interval; the
            // consumer refuses the classic protocol's settings, so the strategy is only the broker's assignor.
            props.put("group.protocol", "consumer");
            if (opt.containsKey("remote-assignor")) props.put("group.remote.assignor", opt.get("remote-assignor"));
        } else {
            props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, String.join(",", strategies));
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, opt.getOrDefault("session-ms", "1500"));
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, opt.getOrDefault("heartbeat-ms", "250"));
        }
        props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, opt.getOrDefault("max-poll-ms", "30000"));
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (opt.containsKey("rack")) props.put(ConsumerConfig.CLIENT_RACK_CONFIG, opt.get("rack"));
        if (opt.containsKey("instance-id")) props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, opt.get("instance-id"));

        JavaMember member = new JavaMember(opt.get("id"), props);
        String[] process = opt.getOrDefault("process-ms", "0").split(",");
        member.processLoMs = Long.parseLong(process[0].trim());
        member.processHiMs = process.length > 1 ? Long.parseLong(process[1].trim()) : member.processLoMs;
        member.commitEveryBatch = opt.containsKey("commit-every-batch");
        member.processRng = new Random((opt.getOrDefault("seed", "0") + ":" + opt.get("id")).hashCode());
        member.watchStdin();
        member.run(List.of(opt.get("topics").split(",")), Long.parseLong(opt.getOrDefault("progress-ms", "1000")), hold);
    }
}
