import ArgumentParser

/// The root of the `ostack` command tree. Subcommands are added as the product grows; each
/// stays thin: parse → one core use case → render.
public struct OStackCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "ostack",
        abstract: "Work with several ObjectStack accounts from the terminal.",
        discussion: """
            Each account is an isolated context: its own keyring namespace, its own encrypted \
            database, its own sync queue and audit trail.
            """,
        version: OStackVersion.current,
        subcommands: [
            Login.self, Logout.self, AccountsCommand.self, Switch.self, Status.self, AuthCommand.self,
            PINCommand.self, Lock.self, Unlock.self, AgentCommand.self, KeyringCommand.self, ConfigCommand.self,
            ObjectsCommand.self, AppsCommand.self, RecordsCommand.self, APICommand.self, SyncCommand.self,
            QueueCommand.self,
            ConflictsCommand.self, ExportDatabaseCommand.self, AuditCommand.self, DoctorCommand.self, OrgCommand.self,
            Completion.self,
        ]
    )

    public init() {}
}
