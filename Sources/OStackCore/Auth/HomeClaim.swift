import FoundationEssentials
import Glibc
import PlatformKit
import SodiumKit

/// One ostack home per account namespace (docs/keyring.md, "One home per account").
///
/// The keyring is the user's, not a home's: two homes (two `OSTACK_HOME`s, or two XDG data
/// directories) on the same keyring prefix address an account's items by the same namespace. Two
/// homes using one account's items would break each other — one's `accounts remove` erases the
/// other's database key, a PIN set in one seals the key the other reads, their audit anchors
/// overwrite each other — so the namespace carries a marker, kind `home`, naming the home it serves
/// (its data directory, resolved). A sign-in claims the namespace before it writes anything there:
/// - no marker, or this home's: the namespace is this home's (the marker is written);
/// - another home's that still lists the account in its registry: refused, `account-in-another-home`,
///   nothing written, the new session signed out;
/// - another home's that is gone or no longer lists the account (moved, deleted, the account
///   removed there): taken over — its credential and audit anchor deleted first, its key material
///   kept (a disk not mounted looks gone too) — unless this home lists the account itself (this
///   home, moved: the items are its own).
/// A registry that exists but cannot be read counts as listing the account: a doubt never erases
/// another home's keys. Namespaces without a marker (written before markers existed) are not
/// checked; the first sign-in that finds one marks it.
struct HomeClaim: Sendable {
    let environment: AuthEnvironment

    /// This home, as markers name it: the data directory with links resolved.
    var home: String { SecureFileSystem.canonicalPath(environment.layout.dataDirectory) }

    enum Owner: Equatable {
        case none, this
        case other(home: String, inUse: Bool)
    }

    /// Whose the namespace of `account` is.
    func owner(of account: AccountID) throws(OStackError) -> Owner {
        guard let marker = try environment.secrets.read(environment.namespaces.key(account, .home)) else {
            return .none
        }
        let named = marker.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        if named == home { return .this }
        return .other(home: named, inUse: Self.home(named, lists: account))
    }

    /// Waits for and takes the lock under which every home of this user claims `account`'s namespace
    /// and lists the account; hold it until the registry lists the account. Without it, two homes
    /// signing in at once could both claim the namespace: the second found the first's marker before
    /// the first's registry listed the account, took that for a home that is gone, and took it over.
    /// Nil when the shared directory cannot be made safely (another user's, a link): the claim then
    /// goes on without it. A wait that runs out (another sign-in to this account holds it that long)
    /// throws: going on then is the race the lock is there for.
    func lock(_ account: AccountID) throws(OStackError) -> FileLock? {
        let directory = environment.layout.claimsDirectory
        guard (try? SecureFileSystem.createPrivateDirectory(directory)) != nil else { return nil }
        // One of 64 files, by the namespace's hash: a bounded set however many accounts come and go
        // (a lock file cannot be removed safely while another process may wait on it), and two
        // accounts sharing one only wait for each other's claim.
        let bucket = BLAKE2b.hash(Array(environment.namespaces.account(account).utf8), length: 16)[0] % 64
        let path = directory + "/claim-\(bucket).lock"
        do {
            return try FileLock(path: path, timeout: environment.lockTimeout)
        } catch where error.operation == .lock && error.errno == EWOULDBLOCK {
            throw OStackError(.storageFailure, detail: "taking the claim lock: another sign-in holds it")
        } catch {
            return nil  // a link or something odd in our own directory: as if there were no lock
        }
    }

    /// Claims the namespace of `account` for this home (see the type's rules), or throws
    /// `account-in-another-home`.
    func claim(_ account: AccountID) throws(OStackError) {
        let owner = try owner(of: account)
        switch owner {
        case .this: return
        case .other(_, inUse: true):
            throw OStackError(
                .accountInAnotherHome, context: .init(host: account.host),
                detail: "the namespace's home marker names another home that lists the account")
        case .none: break
        case .other(_, inUse: false):
            // This home moved (renamed, another OSTACK_HOME, another mount point): the items are its
            // own, its database needs their key, and only the marker is out of date. (A red-team
            // review found the take-over below deleting the moved home's own database key.)
            if try environment.registry.accounts().contains(where: { $0.id == account }) { break }
            // What a home that is gone left behind: its credential and audit anchor would only confuse
            // this one (an anchor ahead of this home's new trail reads as a trail cut short), so they
            // go. Key material stays: "gone" may be a disk not mounted now, whose data would need it
            // again (and a database key is used by this home's new database too).
            for item in try environment.secrets.list(namespace: environment.namespaces.account(account))
            where [.sessionToken, .apiKey, .auditAnchor].contains(item.kind) {
                try environment.secrets.delete(item)
            }
        }
        let key = environment.namespaces.key(account, .home)
        let bytes = SecretBytes(copying: Array(home.utf8))
        try environment.secrets.write(bytes, for: key)
        guard try environment.secrets.read(key) == bytes else {
            throw OStackError(.keyringUnavailable, detail: "the home marker did not read back")
        }
    }

    /// Whether the home whose data directory is `directory` has `account` in its registry. A registry
    /// that is missing says no; one that cannot be read or decoded says yes.
    static func home(_ directory: String, lists account: AccountID) -> Bool {
        struct Registry: Decodable {
            struct Entry: Decodable { var id: String }
            var accounts: [Entry]
        }
        guard directory.hasPrefix("/") else { return true }
        let bytes: [UInt8]?
        do {
            bytes = try SecureFileSystem.readFile(directory + "/accounts.json", followLinks: true, limit: 64 << 20)
        } catch {
            return true
        }
        guard let bytes else { return false }
        guard let registry = try? JSONDecoder().decode(Registry.self, from: Data(bytes)) else { return true }
        return registry.accounts.contains { $0.id == account.rawValue }
    }
}
