/// Failures of SodiumKit operations. Values carry no key, password or plaintext.
public enum SodiumError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidKeyLength(expected: Int, actual: Int)
    case invalidSaltLength(expected: Int, actual: Int)
    /// Argon2 limits or algorithm outside what libsodium accepts (or what ostack allows).
    case invalidParameters
    /// Argon2 could not allocate its memory.
    case outOfMemory
    /// AEAD open or MAC verification failed: wrong key, wrong associated data, or tampering.
    case authenticationFailed
    /// Malformed input (e.g. a sealed box too short, a KDF context that is not 8 bytes).
    case invalidInput

    public var description: String {
        switch self {
        case .invalidKeyLength(let expected, let actual): "key must be \(expected) bytes, got \(actual)"
        case .invalidSaltLength(let expected, let actual): "salt must be \(expected) bytes, got \(actual)"
        case .invalidParameters: "invalid key-derivation parameters"
        case .outOfMemory: "not enough memory for key derivation"
        case .authenticationFailed: "authentication failed"
        case .invalidInput: "invalid input"
        }
    }
}
