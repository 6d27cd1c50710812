/// Which rule picked the account for a command (docs/commands.md), reported by `status` as `selectedBy`.
public enum SelectionSource: String, Sendable, Codable {
    case flag
    case env
    case `default`
}

/// Resolves account references and applies the selection precedence
/// `--account` > `OSTACK_ACCOUNT` > the default account.
public struct AccountSelection: Sendable {
    public let accounts: [Account]

    public init(accounts: [Account]) {
        self.accounts = accounts
    }

    /// Picks the account for a command.
    /// - Throws: `unknown-account` / `ambiguous-account` for a reference that does not resolve,
    ///   `no-account` when nothing selects one.
    public func select(flag: String?, environment: String?, defaultAccount: AccountID?) throws(OStackError)
        -> (account: Account, source: SelectionSource)
    {
        if let flag, !flag.isEmpty { return (try resolve(flag), .flag) }
        // OSTACK_ACCOUNT outlives the accounts it was set for (a shell profile, a script): it must name
        // one exactly, so that removing `alice` never sends its commands to `alice-work`.
        if let environment, !environment.isEmpty {
            return (try resolve(environment, exactFor: "OSTACK_ACCOUNT"), .env)
        }
        if let defaultAccount, let account = accounts.first(where: { $0.id == defaultAccount }) {
            return (account, .default)
        }
        throw OStackError(.noAccount, context: .init(count: accounts.count), detail: "no account selected")
    }

    /// Resolves a user's reference: an account id, an alias, `email@host` (or an e-mail address
    /// that only one account uses), or an unambiguous prefix of an alias (in that order).
    /// `exactFor` is what must name an account exactly ("OSTACK_ACCOUNT", "Removing an account"): a
    /// prefix is then refused, naming the account it would have picked.
    public func resolve(_ reference: String, exactFor: String? = nil) throws(OStackError) -> Account {
        // An empty reference (a script's unset variable) is a prefix of every alias: it names none.
        guard !reference.trimmingWhitespace().isEmpty else {
            throw OStackError(
                .invalidInput,
                context: .init(suggestion: "Name an account: an alias, an id or an e-mail address."),
                detail: "empty account reference")
        }
        if let exact = accounts.first(where: { $0.id.rawValue == reference }) { return exact }
        if let alias = accounts.first(where: { $0.alias == reference }) { return alias }
        let lowered = reference.lowercased()
        var byEmail = accounts.filter { $0.emailAtHost.lowercased() == lowered }
        if byEmail.isEmpty { byEmail = accounts.filter { $0.email.lowercased() == lowered } }
        if byEmail.count == 1 { return byEmail[0] }
        let byPrefix = accounts.filter { $0.alias.hasPrefix(reference) }
        let shown = String(reference.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(80))
        if byPrefix.count == 1 {
            guard let exactFor else { return byPrefix[0] }
            throw OStackError(
                .unknownAccount,
                context: .init(
                    account: shown,
                    suggestion: .text(
                        "\(exactFor) needs an account's whole alias, id or e-mail address, not a prefix: "
                            + "did you mean \(byPrefix[0].alias)?")),
                detail: "prefix refused")
        }
        if byPrefix.count > 1 || byEmail.count > 1 {
            throw OStackError(
                .ambiguousAccount,
                context: .init(
                    account: shown,
                    suggestion: .text((byPrefix.count > 1 ? byPrefix : byEmail).map(\.alias).joined(separator: ", "))),
                detail: "ambiguous account reference")
        }
        throw OStackError(.unknownAccount, context: .init(account: shown), detail: "unknown account reference")
    }
}
