/// The address of one keyring item (docs/keyring.md, "Schema"): every lookup matches all four attributes plus
/// `app`. Attributes are public (docs/security.md#kr-2): never put secrets or e-mail addresses in them.
public struct KeyringAddress: Sendable, Hashable, CustomStringConvertible {
    public var namespace: String
    public var account: String
    public var kind: String
    public var version: Int

    public init(namespace: String, account: String, kind: String, version: Int) {
        self.namespace = namespace
        self.account = account
        self.kind = kind
        self.version = version
    }

    public var description: String { "\(namespace)/\(kind)/v\(version)" }
}
