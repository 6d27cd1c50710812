import KeyringKit
import OStackTestSupport
import PlatformKit
import SodiumKit
import Testing

@Suite struct FileKeyringTests {
    let directory = TemporaryDirectory()
    var path: String { directory.appending("keyring.enc") }

    func keyring(_ passphrase: String) -> FileKeyring {
        FileKeyring(
            path: path, passphrase: { _ in SecretBytes(copying: Array(passphrase.utf8)) },
            parameters: { Argon2id.Parameters(opsLimit: 1, memLimit: 8192, salt: Argon2id.freshSalt()) })
    }

    let address = KeyringAddress(namespace: "ostack:auth:h::u", account: "h::u", kind: "db-key", version: 1)

    @Test func roundTripsAcrossInstancesAndIsPrivate() throws {
        let secret: [UInt8] = [0, 1, 2, 255, 0]
        try keyring("correct horse").write(SecretBytes(copying: secret), for: address)
        let other = keyring("correct horse")
        #expect(try other.read(address)?.withUnsafeBytes { Array($0) } == secret)
        #expect(try other.list(namespace: address.namespace) == [address])
        #expect(try other.list(namespace: "elsewhere").isEmpty)
        #expect(SecureFileSystem.mode(of: path) == 0o600)
        try other.delete(address)
        #expect(try keyring("correct horse").read(address) == nil)
    }

    @Test func wrongPassphraseOpensNothingAndChangesNothing() throws {
        try keyring("right").write(SecretBytes(copying: [42]), for: address)
        let before = try SecureFileSystem.readFile(path)
        #expect(throws: KeyringError.wrongPassphrase) { try keyring("wrong").read(address) }
        #expect(throws: KeyringError.wrongPassphrase) {
            try keyring("wrong").write(SecretBytes(copying: [1]), for: address)
        }
        #expect(try SecureFileSystem.readFile(path) == before)
    }

    @Test func theFileRevealsNoSecretOrName() throws {
        try keyring("pw").write(SecretBytes(copying: Array("CNRY-FILE-SECRET".utf8)), for: address)
        let text = String(decoding: try #require(try SecureFileSystem.readFile(path)), as: UTF8.self)
        #expect(!text.contains("CNRY"))
        #expect(!text.contains("ostack:auth"))
    }

    @Test func tamperingIsDetected() throws {
        try keyring("pw").write(SecretBytes(copying: [7]), for: address)
        var bytes = try #require(try SecureFileSystem.readFile(path))
        let index = bytes.lastIndex(of: UInt8(ascii: "]"))! - 2  // inside the ciphertext array
        bytes[index] = bytes[index] == UInt8(ascii: "1") ? UInt8(ascii: "2") : UInt8(ascii: "1")
        try SecureFileSystem.writeAtomically(bytes, to: path)
        #expect(throws: KeyringError.self) { try keyring("pw").read(address) }
    }

    /// A file that is not the file keyring's format (truncated, emptied, replaced) is `damaged`, not
    /// an unreachable Secret Service.
    @Test(arguments: [0, 7, 40]) func aFileThatIsNotAKeyringIsDamaged(_ keep: Int) throws {
        try keyring("pw").write(SecretBytes(copying: [7]), for: address)
        let bytes = try #require(try SecureFileSystem.readFile(path))
        try SecureFileSystem.writeAtomically(Array(bytes.prefix(keep)), to: path)
        #expect(throws: KeyringError.damaged) { try keyring("pw").read(address) }
    }
}
