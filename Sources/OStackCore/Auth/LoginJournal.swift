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
        let bytes: [UInt8]?
        do {
            bytes = try SecureFileSystem.readFile(path(layout))
        } catch {
            throw OStackError(.storageFailure, detail: "reading the login journal: \(error)")
        }
        guard let bytes else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard let journal = try? decoder.decode(LoginJournal.self, from: Data(bytes)) else {
            throw OStackError(.unsupportedFormat, detail: "the login journal is not readable")
        }
        return journal
    }

    func save(_ layout: FileLayout) throws(OStackError) {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        do {
            try SecureFileSystem.createDirectory(layout.stateDirectory)
            try SecureFileSystem.writeAtomically(Array(encoder.encode(self)), to: Self.path(layout))
        } catch {
            throw OStackError(.storageFailure, detail: "writing the login journal: \(error)")
        }
    }

    static func clear(_ layout: FileLayout) throws(OStackError) {
        do {
            try SecureFileSystem.removeFile(path(layout))
        } catch {
            throw OStackError(.storageFailure, detail: "clearing the login journal: \(error)")
        }
    }
}
