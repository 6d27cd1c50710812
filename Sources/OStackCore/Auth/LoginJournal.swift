import FoundationEssentials
import PlatformKit

/// The guest → account migration journal (`state/login-journal.json`, 0600, non-secret).
///
/// Login writes it before the first keyring write and clears it last, so a crash at any step
/// leaves enough to finish (or cleanly undo) on the next command (docs/storage.md, "Sign-in and the guest namespace"):
/// - `signingIn`: a guest token may exist, the account is not known yet → the guest items are
///   deleted (the user signs in again).
/// - `migrating`: the account is known → copy the guest token to the account namespace, verify,
///   delete the guest items, register the account, create its database, clear the journal.
struct LoginJournal: Codable, Equatable {
    enum Phase: String, Codable { case signingIn, migrating }

    var version = 1
    var phase: Phase
    var server: String
    var credentialKind: Account.CredentialKind
    var alias: String?
    var makeDefault: Bool
    /// Confirmed rebuild of a locked-out account's local data.
    var rebuild: Bool?
    // Known once the server told us who signed in:
    var accountID: AccountID?
    var userID: String?
    var email: String?
    var displayName: String?
    var expiresAt: Date?
    // The account's routes and scope (an environment, an organization), known before sign-in:
    var routes: ServerRoutes?
    var environment: String?
    var organization: String?

    static func path(_ layout: FileLayout) -> String { layout.stateDirectory + "/login-journal.json" }

    static func load(_ layout: FileLayout) throws(OStackError) -> LoginJournal? {
        try JournalFile.read(LoginJournal.self, at: path(layout), name: "login journal")
    }

    func save(_ layout: FileLayout) throws(OStackError) {
        try JournalFile.write(self, to: Self.path(layout), in: layout.stateDirectory, name: "login journal")
    }

    static func clear(_ layout: FileLayout) throws(OStackError) {
        try JournalFile.clear(path(layout), name: "login journal")
    }
}
