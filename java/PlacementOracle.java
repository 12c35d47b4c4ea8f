// Reference answers for kassign.placement from Kafka's own AdminUtils.assignReplicasToBrokers.
// AdminUtils lives in Kafka's server-common module, which is not in the kafka-clients jar: compile
// this file together with server-common's AdminUtils.java, BrokerMetadata.java and
// AdminOperationException.java taken from an Apache Kafka source checkout (see
// tests/placement/regenerate_vectors.py, which writes tests/placement/kafka_vectors.jsonl).
// One case per stdin line: "id:rack,id:rack,...<TAB>partitions<TAB>rf<TAB>fixedStartIndex<TAB>startPartitionId"
// (empty rack = none); answers "OK p=[r,r,..] p=[...]" (partitions ascending) or "ERR <message>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

import org.apache.kafka.admin.AdminUtils;
import org.apache.kafka.admin.BrokerMetadata;

public class PlacementOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\t");
            List<BrokerMetadata> brokers = new ArrayList<>();
            for (String b : f[0].split(",")) {
                String[] kv = b.split(":", -1);
                brokers.add(new BrokerMetadata(Integer.parseInt(kv[0]), kv[1].isEmpty() ? Optional.empty() : Optional.of(kv[1])));
            }
            try {
                Map<Integer, List<Integer>> result = AdminUtils.assignReplicasToBrokers(brokers, Integer.parseInt(f[1]),
                    Integer.parseInt(f[2]), Integer.parseInt(f[3]), Integer.parseInt(f[4]));
                StringBuilder sb = new StringBuilder("OK");
                for (Map.Entry<Integer, List<Integer>> e : new TreeMap<>(result).entrySet())
                    sb.append(' ').append(e.getKey()).append('=').append(e.getValue().toString().replace(" ", ""));
                System.out.println(sb);
            } catch (Exception e) {
                System.out.println("ERR " + e.getMessage());
            }
        }
    }
}
