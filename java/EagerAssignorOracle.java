// Conformance oracle for kassign's RangeAssignor and RoundRobinAssignor: runs kafka-clients'
// own assignors. One scenario per stdin line, one answer per stdout line ("OK\t..." or "ERR\t...").
// Request (tab-separated, names are plain tokens without separators):
//   assignor   "range" | "roundrobin"
//   topics     t1:5,t2:3                        (topic:partition count)
//   members    m1/inst/rack/t1+t2;m2/-/-/t2    (member/group instance id or -/rack or -/topics)
//   racks      t1:0=r1+r2;t1:1=r3              (replica racks per partition; may be empty)
// Answer: m1=t1:0,t1:1;m2=                      (members in request order, partitions as assigned)
// Like AbstractPartitionAssignor.assign(Cluster, ...), only subscribed topics with partitions are
// passed to the assignor, partitions sorted by id.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractPartitionAssignor;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

public class EagerAssignorOracle {
    static Optional<String> opt(String s) {
        return s.equals("-") ? Optional.empty() : Optional.of(s);
    }

    static String answer(String[] f) {
        AbstractPartitionAssignor assignor = f[0].equals("range") ? new RangeAssignor() : new RoundRobinAssignor();
        Map<String, Integer> counts = new HashMap<>();
        if (!f[1].isEmpty())
            for (String t : f[1].split(",")) {
                String[] kv = t.split(":");
                counts.put(kv[0], Integer.parseInt(kv[1]));
            }
        Map<String, Subscription> subscriptions = new LinkedHashMap<>();
        Set<String> subscribed = new HashSet<>();
        for (String m : f[2].split(";")) {
            String[] p = m.split("/", -1);
            List<String> topics = p[3].isEmpty() ? new ArrayList<>() : new ArrayList<>(Arrays.asList(p[3].split("\\+")));
            subscribed.addAll(topics);
            Subscription s = new Subscription(topics, null, Collections.emptyList(), -1, opt(p[2]));
            s.setGroupInstanceId(opt(p[1]));
            subscriptions.put(p[0], s);
        }
        Map<String, Set<String>> racks = new HashMap<>();
        if (f.length > 3 && !f[3].isEmpty())
            for (String r : f[3].split(";")) {
                String[] kv = r.split("=", -1);
                racks.put(kv[0], kv[1].isEmpty() ? new HashSet<>() : new HashSet<>(Arrays.asList(kv[1].split("\\+"))));
            }
        Map<String, List<PartitionInfo>> partitionsPerTopic = new HashMap<>();
        int nodeId = 0;
        for (Map.Entry<String, Integer> e : counts.entrySet()) {
            if (!subscribed.contains(e.getKey()) || e.getValue() <= 0) continue;
            List<PartitionInfo> infos = new ArrayList<>();
            for (int i = 0; i < e.getValue(); i++) {
                List<Node> replicas = new ArrayList<>();
                for (String rack : racks.getOrDefault(e.getKey() + ":" + i, Collections.emptySet()))
                    replicas.add(new Node(nodeId++, "h", 9092, rack));
                Node[] nodes = replicas.toArray(new Node[0]);
                infos.add(new PartitionInfo(e.getKey(), i, nodes.length > 0 ? nodes[0] : Node.noNode(), nodes, nodes));
            }
            partitionsPerTopic.put(e.getKey(), infos);
        }
        Map<String, List<TopicPartition>> result = assignor.assignPartitions(partitionsPerTopic, subscriptions);
        List<String> members = new ArrayList<>();
        for (String member : subscriptions.keySet()) {
            List<String> tps = new ArrayList<>();
            for (TopicPartition tp : result.get(member)) tps.add(tp.topic() + ":" + tp.partition());
            members.add(member + "=" + String.join(",", tps));
        }
        return String.join(";", members);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            try {
                out.println("OK\t" + answer(line.split("\t", -1)));
            } catch (Throwable e) {
                out.println("ERR\t" + e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).replace('\n', ' '));
            }
            if (!in.ready()) out.flush();  // answer each batch as soon as the caller has sent all of it
        }
        out.flush();
    }
}
