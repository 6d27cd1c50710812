import FoundationEssentials
import PlatformKit

/// What `accounts list` and `status` show about one account, computed from the registry and files
/// only (no keyring or network access, so it is fast and works while the keyring is locked).
public struct AccountSummary: Sendable, Equatable {
    public var account: Account
    public var isDefault: Bool
    public var hasPIN: Bool
    public var locked: Bool
    /// Sealed, but the PIN is gone after too many wrong ones: only the recovery key opens it.
    public var pinLockedOut = false

    public var signedIn: Bool { account.sessionState == .signedIn }
}

/// The session as `status` reports it.
public struct SessionStatus: Sendable, Equatable {
    public enum State: String, Sendable { case valid, expired, signedOut = "signed-out" }
    public var state: State
    public var expiresAt: Date?
}

/// Use cases on the set of accounts: list, rename, switch.
public struct AccountsService: Sendable {
    public let layout: FileLayout
    public let registry: AccountRegistry
    public let configuration: ConfigurationStore
    /// Asked (without counting as use) whether PIN-protected accounts are unlocked.
    public var agent: AgentClient?
    /// The keyring side of the audit buffer (its lines are authenticated under a keyring-held key,
    /// docs/security.md#aud-6); asked only when an event is recorded.
    public var auditEnvironment: (@Sendable () -> AuthEnvironment?)?

    public init(layout: FileLayout) {
        self.layout = layout
        registry = AccountRegistry(layout: layout)
        configuration = ConfigurationStore(layout: layout)
    }

    public func summaries() throws(OStackError) -> [AccountSummary] {
        let accounts = try registry.accounts()
        let defaultAccount = try configuration.load().defaultAccount
        return accounts.map { summary(of: $0, defaultAccount: defaultAccount) }
    }

    public func summary(of account: Account, defaultAccount: AccountID?) -> AccountSummary {
        let directory = layout.accountDirectory(account.dataDirectory)
        let hasPIN = SecureFileSystem.exists(directory + "/pin.env")
        let sealed = hasPIN || SecureFileSystem.exists(directory + "/recovery.env")
        let locked = sealed && !(agent?.isUnlocked(account.id) ?? false)
        var summary = AccountSummary(
            account: account, isDefault: account.id == defaultAccount, hasPIN: hasPIN, locked: locked)
        summary.pinLockedOut = sealed && !hasPIN
        return summary
    }

    /// Makes `reference` the default account (atomically, config only).
    @discardableResult
    public func switchTo(_ reference: String) throws(OStackError) -> Account {
        let account = try AccountSelection(accounts: registry.accounts()).resolve(reference)
        try configuration.update { $0.defaultAccount = account.id }
        (auditEnvironment?()?.auditBuffer(account) ?? AuditBuffer(layout: layout, account: account)).append("switch")
        return account
    }

    /// Gives an account a new alias (unique, 1–64 of `A–Z a–z 0–9 . _ -`).
    @discardableResult
    public func rename(_ reference: String, to newAlias: String) throws(OStackError) -> Account {
        try Self.validateAlias(newAlias)
        return try registry.update { (accounts: inout [Account]) throws(OStackError) -> Account in
            let target = try AccountSelection(accounts: accounts).resolve(reference)
            if accounts.contains(where: { $0.alias == newAlias && $0.id != target.id }) {
                throw OStackError(.invalidInput, context: .init(suggestion: "The alias '\(newAlias)' is already used."))
            }
            let index = accounts.firstIndex { $0.id == target.id }!
            accounts[index].alias = newAlias
            return accounts[index]
        }
    }

    public static func validateAlias(_ alias: String) throws(OStackError) {
        let allowed = alias.unicodeScalars.allSatisfy {
            ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)))
                || "._-".unicodeScalars.contains($0)
        }
        guard (1...64).contains(alias.count), allowed, !alias.hasPrefix("-") else {
            throw OStackError(
                .invalidInput, context: .init(suggestion: "An alias has 1–64 letters, digits, '.', '_' or '-'."))
        }
    }

    /// The session state at `now`.
    public static func sessionStatus(of account: Account, now: Date) -> SessionStatus {
        switch account.sessionState {
        case .signedOut: return SessionStatus(state: .signedOut, expiresAt: nil)
        case .expired: return SessionStatus(state: .expired, expiresAt: account.sessionExpiresAt)
        case .signedIn:
            if let expiry = account.sessionExpiresAt, expiry <= now {
                return SessionStatus(state: .expired, expiresAt: expiry)
            }
            return SessionStatus(state: .valid, expiresAt: account.sessionExpiresAt)
        }
    }
}
