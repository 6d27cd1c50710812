import ArgumentParser
import FoundationEssentials
import OStackCore

/// `ostack status [--all]` — works without the keyring or the network, also while locked.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show the selected account (or all) and its state.")

    @OptionGroup var global: GlobalOptions
    @Flag(name: .long, help: "Show every account.") var all = false
    @Flag(
        name: .long,
        help: "One line for a shell prompt: alias, lock state, queued changes (nothing when no account is selected).")
    var short = false

    func validate() throws {
        if short && all { throw ValidationError("--short and --all cannot be used together.") }
        if all && global.account != nil {
            throw ValidationError("--all shows every account: --account does not apply.")
        }
    }

    func run() async throws {
        try await CommandRunner.run(global) { context in
            if short { return try Self.runShort(context) }
            let service = context.accountsService()
            let now = Date()
            let defaultAccount = try service.configuration.load().defaultAccount
            if all {
                let documents = try service.registry.accounts().map { account in
                    Self.document(
                        service.summary(of: account, defaultAccount: defaultAccount), selectedBy: nil, now: now,
                        state: Self.state(context, account))
                }
                struct Document: Encodable { var accounts: [StatusDocument] }
                context.emit(json: Document(accounts: documents)) { () -> String in
                    // `--format tsv|csv`: one row per account.
                    if Self.asLines(context) {
                        let columns = ["account", "server", "user", "session", "lock", "queue", "last sync"]
                        return Table(
                            headers: columns,
                            rows: documents.map { document in
                                let fields = Dictionary(Self.fields(document).map { ($0[0], $0[1]) }) { a, _ in a }
                                return columns.map { fields[$0] ?? "" }
                            }
                        ).render(terminal: context.terminal)
                    }
                    // No accounts: a note on stderr, nothing a program would read as one.
                    if documents.isEmpty { context.note("No accounts yet. Run `ostack login` to add one.") }
                    return documents.map { Self.human($0) }.joined(separator: "\n")
                }
                return
            }
            let (account, source) = try context.selectedAccount()
            let document = Self.document(
                service.summary(of: account, defaultAccount: defaultAccount), selectedBy: source, now: now,
                state: Self.state(context, account))
            context.emit(json: document) {
                Self.asLines(context)
                    ? Table(headers: ["field", "value"], rows: Self.fields(document)).render(terminal: context.terminal)
                    : Self.human(document)
            }
        }
    }

    /// Whether `--format tsv` or `csv` was asked for (a pipe alone keeps the aligned text).
    static func asLines(_ context: CommandContext) -> Bool {
        [.tsv, .csv].contains(context.global.format)
    }

    /// Queue counts and last sync as of the account's last data command (`state.json`: read without
    /// the keyring, so `status` also works while locked).
    static func state(_ context: CommandContext, _ account: Account) -> AccountStateSummary? {
        AccountStateSummary.read(context.layout.accountDirectory(account.dataDirectory) + "/state.json")
    }

    static func document(
        _ summary: AccountSummary, selectedBy: SelectionSource?, now: Date, state: AccountStateSummary? = nil
    ) -> StatusDocument {
        let session = AccountsService.sessionStatus(of: summary.account, now: now)
        return StatusDocument(
            account: AccountDocument(summary), selectedBy: selectedBy?.rawValue,
            session: .init(state: session.state.rawValue, expiresAt: session.expiresAt),
            // Unknown (null) until a data command has run for the account.
            queue: state.map { .init(pending: $0.pending, failed: $0.failed, conflict: $0.conflict) },
            lastSyncAt: state?.lastSyncAt)
    }

    static func human(_ document: StatusDocument) -> String {
        let rows = fields(document)
        let width = rows.map { $0[0].count }.max() ?? 0
        return rows.map {
            $0[0] + String(repeating: " ", count: width - $0[0].count) + "  " + ErrorPresenter.sanitize($0[1])
        }
        .joined(separator: "\n") + "\n"
    }

    /// The account's state as (label, value) pairs, as `status` shows them.
    static func fields(_ document: StatusDocument) -> [[String]] {
        var rows: [[String]] = [
            ["account", "\(document.account.alias) (\(document.account.id))"],
            ["server", document.account.server],
            ["user", document.account.email],
        ]
        if let selectedBy = document.selectedBy {
            let rule =
                ["flag": "--account", "env": "OSTACK_ACCOUNT", "default": "default account"][selectedBy] ?? selectedBy
            rows.append(["selected by", rule])
        }
        var session = document.session.state
        if document.account.credential == "api-key" { session += ", API key" }
        if let expiry = document.session.expiresAt { session += ", expires \(expiry.formatted(.iso8601))" }
        rows.append(["session", session])
        let lock =
            document.account.hasPin
            ? (document.account.locked ? "locked" : "unlocked")
            : (document.account.pinLockedOut
                ? (document.account.locked
                    ? "locked; the PIN is locked out (use the recovery key)" : "unlocked (PIN locked out)")
                : "no PIN")
        rows.append(["lock", lock])
        if let queue = document.queue {
            rows.append(["queue", "\(queue.pending) pending, \(queue.failed) failed, \(queue.conflict) in conflict"])
        }
        rows.append(["last sync", document.lastSyncAt.map { $0.formatted(.iso8601) } ?? "never"])
        return rows
    }
}
