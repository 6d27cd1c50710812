import KeyringKit
import SodiumKit
import Testing

@Suite struct InMemoryKeyringTests {
    @Test func behavesLikeAKeyring() throws {
        let keyring = InMemoryKeyring()
        let address = KeyringAddress(namespace: "n", account: "a", kind: "db-key", version: 1)
        #expect(try keyring.read(address) == nil)
        try keyring.write(SecretBytes(copying: [1, 2]), for: address)
        #expect(try keyring.read(address)?.withUnsafeBytes { Array($0) } == [1, 2])
        #expect(try keyring.list(namespace: "n") == [address])
        #expect(try keyring.list(namespace: "other").isEmpty)
        try keyring.delete(address)
        #expect(try keyring.read(address) == nil)
    }

    @Test func injectedFailuresAreReported() throws {
        let keyring = InMemoryKeyring()
        let address = KeyringAddress(namespace: "n", account: "a", kind: "db-key", version: 1)
        for failure in [KeyringError.locked, .noService, .timeout] {
            keyring.fail(with: failure)
            #expect(throws: failure) { try keyring.read(address) }
        }
        keyring.fail(with: nil)
        #expect(try keyring.read(address) == nil)
    }
}
