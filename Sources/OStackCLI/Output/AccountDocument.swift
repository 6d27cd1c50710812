import FoundationEssentials
import OStackCore

/// The account object of docs/commands.md, "JSON output" (`accounts list`, `status`, `login`).
struct AccountDocument: Encodable {
    var id: String
    var alias: String
    var server: String
    var userId: String
    var email: String
    /// `session` (a signed-in user) or `api-key`.
    var credential: String
    var isDefault: Bool
    var signedIn: Bool
    var locked: Bool
    var hasPin: Bool
    /// The PIN no longer works (too many wrong ones): only the recovery key unlocks.
    var pinLockedOut: Bool

    init(_ summary: AccountSummary) {
        id = summary.account.id.rawValue
        alias = summary.account.alias
        server = summary.account.server.absoluteString
        userId = summary.account.userID
        email = summary.account.email
        credential = summary.account.credentialKind.rawValue
        isDefault = summary.isDefault
        signedIn = summary.signedIn
        locked = summary.locked
        hasPin = summary.hasPIN
        pinLockedOut = summary.pinLockedOut
    }
}

/// `status` (docs/commands.md, "JSON output"). `lastSyncAt` is null until the account first synced.
struct StatusDocument: Encodable {
    struct Session: Encodable {
        var state: String
        @AlwaysPresent var expiresAt: Date?
    }
    struct Queue: Encodable {
        var pending: Int
        var failed: Int
        var conflict: Int
    }

    var account: AccountDocument
    @AlwaysPresent var selectedBy: String?
    var session: Session
    @AlwaysPresent var queue: Queue?
    @AlwaysPresent var lastSyncAt: Date?
}

/// How every JSON document names an account: `{"id","alias"}` under `account` (or a list of them
/// under `accounts`), the same in every command (docs/commands.md, "JSON output").
struct AccountReference: Encodable {
    var id: String
    var alias: String

    init(_ account: Account) {
        id = account.id.rawValue
        alias = account.alias
    }
}
