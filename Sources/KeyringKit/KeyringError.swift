/// Why a keyring call failed (docs/security.md#kr-3). "Not found" is not an error: reads return `nil`.
public enum KeyringError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The collection is locked; nothing was read, written or deleted.
    case locked
    /// No Secret Service is reachable (no D-Bus session, no keyring daemon).
    case noService
    /// The call did not finish within the deadline (a hung daemon).
    case timeout
    /// The service refused the call.
    case denied
    /// The file backend's passphrase does not open its file.
    case wrongPassphrase
    /// A passphrase was needed but none could be read (no terminal, `--no-input`).
    case passphraseRequired
    /// Anything else: a short, secret-free description (error domain and code).
    case other(String)

    public var description: String {
        switch self {
        case .locked: "keyring locked"
        case .noService: "no Secret Service"
        case .timeout: "keyring timeout"
        case .denied: "keyring access denied"
        case .wrongPassphrase: "wrong keyring passphrase"
        case .passphraseRequired: "keyring passphrase required"
        case .other(let detail): "keyring error (\(detail))"
        }
    }
}
