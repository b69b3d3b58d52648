// Readiness probe for the dev/CI broker, run by broker.sh with the broker's own jars
// (kafka-clients is on that classpath), so it needs no Python package.
//
//   java -cp 'lib/*:classes' KafkaReady BOOTSTRAP TIMEOUT_SECONDS
//
// Succeeds (exit 0) once the broker lists topics and describes the cluster, and once the
// group and transaction coordinators answer (this creates __consumer_offsets and
// __transaction_state, so the first consumer group / init_transactions of a test is fast).
// Exit 1 on timeout; the last error is printed on stderr.
import java.util.Collections;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.TransactionalIdNotFoundException;

public class KafkaReady {
    public static void main(String[] args) throws Exception {
        String bootstrap = args.length > 0 ? args[0] : "127.0.0.1:9092";
        long timeoutS = args.length > 1 ? Long.parseLong(args[1]) : 60;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutS);

        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "5000");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "200");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "200");
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "uss-stream-kafka-ready");

        String step = "connect";
        Throwable last = null;
        try (Admin admin = Admin.create(p)) {
            while (System.nanoTime() < deadline) {
                try {
                    step = "describeCluster";
                    String clusterId = admin.describeCluster().clusterId().get(5, TimeUnit.SECONDS);
                    int nodes = admin.describeCluster().nodes().get(5, TimeUnit.SECONDS).size();
                    if (nodes < 1) throw new IllegalStateException("no live broker in metadata yet");
                    step = "listTopics";
                    int topics = admin.listTopics().names().get(5, TimeUnit.SECONDS).size();
                    step = "group coordinator";
                    try {
                        admin.describeConsumerGroups(Collections.singleton("uss-stream-kafka-ready"))
                             .all().get(10, TimeUnit.SECONDS);
                    } catch (ExecutionException e) {
                        if (!(e.getCause() instanceof GroupIdNotFoundException)) throw e;
                    }
                    step = "transaction coordinator";
                    try {
                        admin.describeTransactions(Collections.singleton("uss-stream-kafka-ready"))
                             .all().get(10, TimeUnit.SECONDS);
                    } catch (ExecutionException e) {
                        if (!(e.getCause() instanceof TransactionalIdNotFoundException)) throw e;
                    }
                    System.out.println("ready: cluster " + clusterId + ", " + nodes + " broker(s), "
                            + topics + " topic(s), group and transaction coordinators up");
                    return;
                } catch (Exception e) {
                    last = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                    System.err.println("not ready (" + step + "): " + last);
                    Thread.sleep(500);
                }
            }
        }
        System.err.println("TIMEOUT after " + timeoutS + "s at step '" + step + "': " + last);
        System.exit(1);
    }
}
