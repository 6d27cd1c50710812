import KeyringKit
import Testing

@testable import OStackCore

/// How keyring failures reach the user: a damaged file keyring is named (not a missing Secret
/// Service), with what to do.
struct KeyringErrorMappingTests {
    @Test func aDamagedFileKeyringIsNamed() {
        let error = KeyringSecretStore.map(.damaged)
        #expect(error.code == .keyringDamaged)
        #expect(error.context.suggestion != nil)
        #expect(KeyringSecretStore.map(.noService).code == .keyringUnavailable)
    }
}
