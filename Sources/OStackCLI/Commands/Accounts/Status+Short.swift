import FoundationEssentials
import OStackCore

/// `ostack status --short`: one line for a shell prompt, e.g. `work unlocked 3 queued`.
///
/// Fields, separated by one space: the alias; `locked`, `unlocked` or `no-pin`; the number of
/// queued changes not yet on the server (pending, failed and in conflict; `?` before the first data
/// command has counted them) followed by `queued`; and, only when the session is not valid,
/// `expired` or `signed-out`. With no account selected it prints nothing and exits 0, so a prompt
/// stays quiet on a machine without accounts; an account named with `--account` or `OSTACK_ACCOUNT`
/// that does not exist is still an error.
///
/// Fast on purpose (it runs at every prompt; `make bench` row `cli-status-short`): it reads the
/// registry, the configuration and `state.json`, asks the agent only for an account that has a PIN,
/// and never touches the keyring, the database or the network.
extension Status {
    /// The `--json` document: every key always present, `null` when unknown or when no account is selected.
    struct ShortDocument: Encodable {
        @AlwaysPresent var alias: String?
        @AlwaysPresent var lock: String?
        @AlwaysPresent var queued: Int?
        @AlwaysPresent var session: String?
    }

    static func runShort(_ context: CommandContext) throws {
        let selected: Account?
        do {
            selected = try context.selectedAccount().account
        } catch {
            guard error.code == .noAccount else { throw error }
            selected = nil
        }
        var document = ShortDocument()
        if let account = selected {
            document = shortDocument(
                context.accountsService().summary(of: account, defaultAccount: nil), state: state(context, account),
                now: Date())
        }
        let line = document.alias == nil ? "" : shortLine(document)
        context.emit(json: document) { line }
    }

    static func shortDocument(_ summary: AccountSummary, state: AccountStateSummary?, now: Date) -> ShortDocument {
        let lock = summary.locked ? "locked" : (summary.hasPIN || summary.pinLockedOut ? "unlocked" : "no-pin")
        return ShortDocument(
            alias: summary.account.alias, lock: lock, queued: state.map { $0.pending + $0.failed + $0.conflict },
            session: AccountsService.sessionStatus(of: summary.account, now: now).state.rawValue)
    }

    static func shortLine(_ document: ShortDocument) -> String {
        var fields = [
            ErrorPresenter.sanitize(document.alias ?? ""), document.lock ?? "",
            document.queued.map(String.init) ?? "?", "queued",
        ]
        if let session = document.session, session != SessionStatus.State.valid.rawValue { fields.append(session) }
        return fields.joined(separator: " ")
    }
}
