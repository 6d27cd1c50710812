import FoundationEssentials
@testable import KeyringKit
import OStackTestSupport
import PlatformKit
import SodiumKit
import Synchronization
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

    /// One passphrase typed in either Unicode form opens the file (docs/security.md#pin-7): a new
    /// file is sealed with the passphrase in NFC, and an opening tries that form first. Before, a
    /// passphrase with an accent typed through an input method that sends `e` + U+0301 was "wrong".
    @Test func aPassphraseInAnotherNormalisationFormOpensTheFile() throws {
        let composed = "caf\u{E9} cr\u{E8}me"
        let decomposed = "cafe\u{301} cre\u{300}me"
        try #require(Array(composed.utf8) != Array(decomposed.utf8))
        try keyring(composed).write(SecretBytes(copying: [42]), for: address)
        #expect(try keyring(decomposed).read(address)?.withUnsafeBytes { Array($0) } == [42])
        try SecureFileSystem.removeFile(path)
        try keyring(decomposed).write(SecretBytes(copying: [43]), for: address)
        #expect(try keyring(composed).read(address)?.withUnsafeBytes { Array($0) } == [43])
        #expect(throws: KeyringError.wrongPassphrase) { try keyring("cafe\u{301} cre\u{301}me").read(address) }
    }

    /// A file as an earlier version wrote it: sealed with the key of `passphrase`'s bytes as typed.
    func writeFileOfAnEarlierVersion(passphrase: String, secret: [UInt8]) throws {
        let parameters = Argon2id.Parameters(opsLimit: 1, memLimit: 8192, salt: Argon2id.freshSalt())
        let key = try Argon2id.deriveKey(password: SecretBytes(copying: Array(passphrase.utf8)), parameters: parameters)
        var header = FileKeyring.Header(kdf: parameters, nonce: [], ciphertext: [])
        let box = try AEAD.seal(
            FileKeyring.encode([FileKeyring.Item(address: address, secret: SecretBytes(copying: secret))]), key: key,
            associatedData: header.associatedData)
        header.nonce = box.nonce
        header.ciphertext = box.ciphertext
        try SecureFileSystem.writeAtomically(Array(JSONEncoder().encode(header)), to: path)
    }

    /// A file sealed with a passphrase as typed in a decomposed form (before ostack composed
    /// passphrases) still opens with those bytes: the second key an opening tries.
    @Test func aFileSealedWithADecomposedPassphraseStillOpens() throws {
        let decomposed = "cafe\u{301}-longer-phrase"
        try writeFileOfAnEarlierVersion(passphrase: decomposed, secret: [44])
        #expect(try keyring(decomposed).read(address)?.withUnsafeBytes { Array($0) } == [44])
        // A write through it keeps the key that opened it.
        try keyring(decomposed).write(SecretBytes(copying: [45]), for: address)
        #expect(try keyring(decomposed).read(address)?.withUnsafeBytes { Array($0) } == [45])
    }

    /// A write after opening a file of an earlier version (sealed from decomposed input) asks for the
    /// passphrase once and seals with the key that opened it, not with a freshly derived, unverified
    /// NFC key: afterwards the composed form still does not open the file.
    @Test func aWriteToALegacyFileAsksOnceAndKeepsTheOpeningKey() throws {
        let decomposed = "cafe\u{301}-longer-phrase"
        let composed = "caf\u{E9}-longer-phrase"
        try writeFileOfAnEarlierVersion(passphrase: decomposed, secret: [44])
        let asks = Mutex(0)
        let writer = FileKeyring(
            path: path,
            passphrase: { _ in
                asks.withLock { $0 += 1 }
                return SecretBytes(copying: Array(decomposed.utf8))
            },
            parameters: { Argon2id.Parameters(opsLimit: 1, memLimit: 8192, salt: Argon2id.freshSalt()) })
        try writer.write(SecretBytes(copying: [45]), for: address)
        #expect(asks.withLock { $0 } == 1)
        #expect(throws: KeyringError.wrongPassphrase) { try keyring(composed).read(address) }
        #expect(try keyring(decomposed).read(address)?.withUnsafeBytes { Array($0) } == [45])
    }
}
