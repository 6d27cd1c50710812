import SodiumKit

/// What the user signs in with. Both are read from a no-echo prompt or stdin, never from argv.
public enum LoginCredential: Sendable {
    case password(SecretBytes)
    /// An `osk_…` API key: stored as the account's credential; never refreshed.
    case apiKey(SecretBytes)
}
