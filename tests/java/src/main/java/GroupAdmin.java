// GroupAdmin: consumer-group administration with the official Java AdminClient,
// for tests/e2e/test_groups_java_go.py. One command from the arguments, or
// (without one) one command per line read from stdin until EOF, so a test
// pays for one JVM and one AdminClient. Each command prints one JSON line:
// {"op": .., "ok": true, ...} or {"op": .., "ok": false, "error_class":
// "GroupNotEmptyException", "error": "<message>"}.
//
// Usage: java -jar roundtrip.jar group-admin --bootstrap H:P [COMMAND ARGS...]
// Commands:
//   list [STATE,STATE..]           listConsumerGroups (with a state filter):
//                                  groups [{group, state, type, simple}]
//   describe GROUP                 describeConsumerGroups: state, type, assignor, simple,
//                                  coordinator {id, host, port}, members [{member_id,
//                                  instance_id, client_id, host, assignment [[topic, p]],
//                                  target}], group_epoch (4.x, consumer protocol)
//   offsets GROUP                  listConsumerGroupOffsets: offsets [{topic, partition,
//                                  offset, metadata, leader_epoch}]
//   alter GROUP TOPIC P=O[,P=O..]  alterConsumerGroupOffsets
//   delete-offsets GROUP TOPIC P[,P..]   deleteConsumerGroupOffsets
//   delete GROUP                   deleteConsumerGroups
//   cluster                        describeCluster: nodes [{id, host, port}], controller

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListConsumerGroupsOptions;
import org.apache.kafka.clients.admin.MemberAssignment;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;

@SuppressWarnings("deprecation")  // ConsumerGroupState & co.: the API both 3.9 and 4.x compile against
final class GroupAdmin {
    static final long TIMEOUT_S = 40;

    private final Admin admin;
    private boolean lastOk;

    static int main(String[] args) {
        String bootstrap = null;
        int a = 0;
        while (a + 1 < args.length && args[a].startsWith("--")) {
            if (args[a].equals("--bootstrap")) {
                bootstrap = args[a + 1];
            } else {
                System.err.println("group-admin: unknown option " + args[a]);
                return 2;
            }
            a += 2;
        }
        if (bootstrap == null) {
            System.err.println("usage: group-admin --bootstrap H:P [COMMAND ARGS...]");
            return 2;
        }
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(AdminClientConfig.CLIENT_ID_CONFIG, "group-admin-java");
        ap.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        ap.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        try (Admin admin = Admin.create(ap)) {
            GroupAdmin ga = new GroupAdmin(admin);
            if (a < args.length) {
                Json out = ga.command(Arrays.copyOfRange(args, a, args.length));
                out.println();
                return ga.lastOk ? 0 : 1;
            }
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                line = line.trim();
                if (!line.isEmpty()) {
                    ga.command(line.split("\\s+")).println();
                }
            }
            return 0;
        } catch (Exception e) {
            e.printStackTrace();
            return 3;
        }
    }

    private GroupAdmin(Admin admin) {
        this.admin = admin;
    }

    Json command(String[] c) {
        lastOk = false;
        Json out = Json.obj().put("op", c[0]);
        try {
            run(c, out);
            lastOk = true;
            return out.put("ok", true);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            return out.put("ok", false).put("error_class", cause.getClass().getSimpleName())
                    .put("error", String.valueOf(cause.getMessage()));
        } catch (Exception e) {
            return out.put("ok", false).put("error_class", e.getClass().getSimpleName())
                    .put("error", String.valueOf(e.getMessage()));
        }
    }

    private void run(String[] c, Json out) throws Exception {
        switch (c[0]) {
            case "list": list(out, c.length > 1 ? c[1] : null); break;
            case "describe": describe(out, arg(c, 1)); break;
            case "offsets": offsets(out, arg(c, 1)); break;
            case "alter": alter(arg(c, 1), arg(c, 2), arg(c, 3)); break;
            case "delete-offsets": deleteOffsets(arg(c, 1), arg(c, 2), arg(c, 3)); break;
            case "delete":
                admin.deleteConsumerGroups(Collections.singletonList(arg(c, 1))).all().get(TIMEOUT_S, TimeUnit.SECONDS);
                break;
            case "cluster": cluster(out); break;
            default: throw new IllegalArgumentException("unknown command " + c[0]);
        }
    }

    private static String arg(String[] c, int i) {
        if (i >= c.length) {
            throw new IllegalArgumentException(c[0] + ": missing argument " + i);
        }
        return c[i];
    }

    private void list(Json out, String states) throws Exception {
        ListConsumerGroupsOptions opts = new ListConsumerGroupsOptions();
        if (states != null) {
            Set<ConsumerGroupState> set = new HashSet<>();
            for (String s : states.split(",")) {
                ConsumerGroupState st = ConsumerGroupState.parse(s);
                if (st == ConsumerGroupState.UNKNOWN) {
                    throw new IllegalArgumentException("unknown group state " + s);
                }
                set.add(st);
            }
            opts.inStates(set);
        }
        List<ConsumerGroupListing> all = new ArrayList<>(
                admin.listConsumerGroups(opts).all().get(TIMEOUT_S, TimeUnit.SECONDS));
        all.sort(Comparator.comparing(ConsumerGroupListing::groupId));
        List<Json> groups = new ArrayList<>();
        for (ConsumerGroupListing g : all) {
            groups.add(Json.obj().put("group", g.groupId())
                    .put("state", g.state().map(Object::toString).orElse(null))
                    .put("type", g.type().map(Object::toString).orElse(null))
                    .put("simple", g.isSimpleConsumerGroup()));
        }
        out.put("groups", groups);
    }

    private static List<Object> tps(MemberAssignment a) {
        List<TopicPartition> l = new ArrayList<>(a.topicPartitions());
        l.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        List<Object> out = new ArrayList<>();
        for (TopicPartition tp : l) {
            out.add(Arrays.asList(tp.topic(), tp.partition()));
        }
        return out;
    }

    /** A 4.x-only accessor (e.g. memberEpoch) through reflection, so 3.9 compiles too. */
    private static Object optional(Object o, String method) {
        try {
            Method m = o.getClass().getMethod(method);
            Object v = m.invoke(o);
            return v instanceof Optional ? ((Optional<?>) v).orElse(null) : v;
        } catch (ReflectiveOperationException e) {
            return null;
        }
    }

    private static Json node(Node n) {
        return n == null ? null : Json.obj().put("id", n.id()).put("host", n.host()).put("port", n.port());
    }

    private void describe(Json out, String group) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(Collections.singletonList(group))
                .describedGroups().get(group).get(TIMEOUT_S, TimeUnit.SECONDS);
        List<Json> members = new ArrayList<>();
        List<MemberDescription> ms = new ArrayList<>(d.members());
        ms.sort(Comparator.comparing(MemberDescription::clientId).thenComparing(MemberDescription::consumerId));
        for (MemberDescription m : ms) {
            members.add(Json.obj().put("member_id", m.consumerId())
                    .put("instance_id", m.groupInstanceId().orElse(null))
                    .put("client_id", m.clientId()).put("host", m.host())
                    .put("assignment", tps(m.assignment()))
                    .put("target", m.targetAssignment().map(GroupAdmin::tps).orElse(null))
                    .put("member_epoch", optional(m, "memberEpoch")));
        }
        out.put("group", d.groupId())
                .put("state", d.state() == null ? null : d.state().toString())
                .put("type", d.type() == null ? null : d.type().toString())
                .put("assignor", d.partitionAssignor())
                .put("simple", d.isSimpleConsumerGroup())
                .put("coordinator", node(d.coordinator()))
                .put("group_epoch", optional(d, "groupEpoch"))
                .put("target_assignment_epoch", optional(d, "targetAssignmentEpoch"))
                .put("members", members);
    }

    private void offsets(Json out, String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> m = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(TIMEOUT_S, TimeUnit.SECONDS);
        List<TopicPartition> keys = new ArrayList<>(m.keySet());
        keys.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        List<Json> offs = new ArrayList<>();
        for (TopicPartition tp : keys) {
            OffsetAndMetadata om = m.get(tp);
            offs.add(Json.obj().put("topic", tp.topic()).put("partition", tp.partition())
                    .put("offset", om == null ? null : om.offset())
                    .put("metadata", om == null ? null : om.metadata())
                    .put("leader_epoch", om == null ? null : om.leaderEpoch().orElse(null)));
        }
        out.put("offsets", offs);
    }

    private void alter(String group, String topic, String spec) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
        for (String po : spec.split(",")) {
            String[] kv = po.split("=");
            m.put(new TopicPartition(topic, Integer.parseInt(kv[0])), new OffsetAndMetadata(Long.parseLong(kv[1])));
        }
        admin.alterConsumerGroupOffsets(group, m).all().get(TIMEOUT_S, TimeUnit.SECONDS);
    }

    private void deleteOffsets(String group, String topic, String spec) throws Exception {
        Set<TopicPartition> s = new HashSet<>();
        for (String p : spec.split(",")) {
            s.add(new TopicPartition(topic, Integer.parseInt(p)));
        }
        admin.deleteConsumerGroupOffsets(group, s).all().get(TIMEOUT_S, TimeUnit.SECONDS);
    }

    private void cluster(Json out) throws Exception {
        DescribeClusterResult r = admin.describeCluster();
        List<Node> nodes = new ArrayList<>(r.nodes().get(TIMEOUT_S, TimeUnit.SECONDS));
        nodes.sort(Comparator.comparingInt(Node::id));
        List<Json> ns = new ArrayList<>();
        for (Node n : nodes) {
            ns.add(node(n));
        }
        out.put("cluster_id", r.clusterId().get(TIMEOUT_S, TimeUnit.SECONDS))
                .put("controller", node(r.controller().get(TIMEOUT_S, TimeUnit.SECONDS)))
                .put("nodes", ns);
    }
}
