/// Why a keyring call failed (docs/security.md#kr-3). "Not found" is not an error: reads return `nil` — and only
/// when the absence is certain (the default collection exists and is unlocked).
public enum KeyringError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The collection is locked; nothing was read, written or deleted.
    case locked
    /// The provider runs but has no default collection: the login keyring is not loaded (gnome-keyring
    /// re-activated without it) or the password manager's database is closed (KeePassXC). Items may
    /// exist and simply not be visible, so nothing can be said about them; nothing was changed.
    case noCollection
    /// No Secret Service is reachable (no D-Bus session, no keyring daemon).
    case noService
    /// The call did not finish within the deadline (a hung daemon).
    case timeout
    /// The call did not finish within the deadline and the provider is one that asks the user to
    /// approve access (KeePassXC): a dialog may be waiting.
    case approvalPending
    /// The service refused the call.
    case denied
    /// The file backend's passphrase does not open its file.
    case wrongPassphrase
    /// A passphrase was needed but none could be read (no terminal, `--no-input`).
    case passphraseRequired
    /// A new passphrase was typed twice and the two differ: nothing was created.
    case passphraseMismatch
    /// The file backend's file is not one it can read (not its format, or a damaged item table).
    case damaged
    /// Anything else: a short, secret-free description (error domain and code).
    case other(String)

    public var description: String {
        switch self {
        case .damaged: "keyring file damaged"
        case .locked: "keyring locked"
        case .noCollection: "keyring has no default collection"
        case .noService: "no Secret Service"
        case .timeout: "keyring timeout"
        case .approvalPending: "keyring timeout (an approval dialog may be waiting)"
        case .denied: "keyring access denied"
        case .wrongPassphrase: "wrong keyring passphrase"
        case .passphraseRequired: "keyring passphrase required"
        case .passphraseMismatch: "new keyring passphrases differ"
        case .other(let detail): "keyring error (\(detail))"
        }
    }
}
