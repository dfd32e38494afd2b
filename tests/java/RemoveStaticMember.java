import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;

/** Removes a static member by its group.instance.id (LeaveGroup v3+), then deletes the group:
 *  `java -cp 'target/java-libs/*' RemoveStaticMember.java BOOTSTRAP GROUP INSTANCE_ID`. */
public class RemoveStaticMember {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(p)) {
            admin.removeMembersFromConsumerGroup(args[1], new RemoveMembersFromConsumerGroupOptions(
                    List.of(new MemberToRemove(args[2])))).all().get();
            System.out.println("removed " + args[2] + " from " + args[1]);
            admin.deleteConsumerGroups(List.of(args[1])).all().get();
            System.out.println("deleted " + args[1]);
        }
    }
}
