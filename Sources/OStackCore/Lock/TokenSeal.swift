import SodiumKit

/// With a PIN, the session token in the keyring is sealed under a subkey of the DEK
/// (`crypto_kdf_derive_from_key`, context `ostk-tok`), so a locked account cannot reach the server
/// either (docs/storage.md, "Keys"; docs/security.md#lock-1). A sealed item starts with the marker `OSTS1`.
public enum TokenSeal {
    static let marker = Array("OSTS1".utf8)
    static let context = "ostk-tok"

    static func key(_ dek: AccountDataKey) throws(OStackError) -> SecretBytes {
        do {
            return try SubkeyDerivation.derive(from: dek.bytes, id: 1, context: context)
        } catch {
            throw OStackError(.internal, detail: "token subkey: \(error)")
        }
    }

    public static func isSealed(_ item: SecretBytes) -> Bool {
        item.count > marker.count && item.withUnsafeBytes { Array($0.prefix(marker.count)) } == marker
    }

    /// The keyring item for `token`: the marker and the sealed token.
    public static func seal(_ token: SessionCredential, dek: AccountDataKey, account: AccountID) throws(OStackError)
        -> SecretBytes
    {
        do {
            let box = try AEAD.seal(token.bytes, key: try key(dek), associatedData: Array(account.rawValue.utf8))
            return SecretBytes(copying: marker + box.combined)
        } catch let error as OStackError {
            throw error
        } catch {
            throw OStackError(.internal, detail: "sealing the token failed")
        }
    }

    /// The token in a sealed keyring item.
    public static func open(_ item: SecretBytes, dek: AccountDataKey, account: AccountID) throws(OStackError)
        -> SessionCredential
    {
        let combined = item.withUnsafeBytes { Array($0.dropFirst(marker.count)) }
        do {
            return SessionCredential(
                try AEAD.open(
                    try AEAD.SealedBox(combined: combined), key: try key(dek),
                    associatedData: Array(account.rawValue.utf8)))
        } catch let error as OStackError {
            throw error
        } catch {
            throw OStackError(.storageUnreadable, detail: "the sealed session token did not open")
        }
    }
}
