/// Labels of keyring items, for people (docs/keyring.md, "Labels"): Seahorse, KWallet and KeePassXC show
/// them, so they say what an item is and whose it is — "ostack session token for work
/// (crm.example.com)". Labels are public (docs/security.md#kr-2): the kind, the alias and the server's
/// host only; never a secret, an e-mail address or a path (KWallet files an item under its label,
/// and a `/` in it would start a folder).
public enum KeyringLabel {
    static let app = "ostack"

    public static func make(kind: SecretKind, alias: String?, host: String?, guest: Bool = false) -> String {
        let what =
            switch kind {
            case .sessionToken: "session token"
            case .apiKey: "API key"
            case .dbKey: "database key"
            case .pinRing: "PIN ring key"
            case .recoveryRing: "recovery ring key"
            case .auditAnchor: "audit anchor"
            case .pendingPINRing: "new PIN ring key"
            case .pendingRecoveryRing: "new recovery ring key"
            case .home: "home marker"
            }
        if guest { return clean("\(app) sign-in in progress (\(what)\(host.map { ", \($0)" } ?? ""))") }
        let owner = alias.map { " for \($0)" } ?? ""
        return clean("\(app) \(what)\(owner)\(host.map { " (\($0))" } ?? "")")
    }

    /// The host part of an account id (`host::user`).
    public static func host(ofAccount account: String) -> String? {
        AccountID.separator(in: account).map { String(account[..<$0.lowerBound]) }
    }

    static func clean(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0.value >= 0x20 && $0 != "/" && $0.value != 0x7F }.map(Character.init))
            .prefix(120).description
    }
}
