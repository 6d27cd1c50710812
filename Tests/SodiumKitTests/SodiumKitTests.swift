import SodiumKit
import Testing

func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef")
    return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] })
}
func unhex(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}
func secret(_ text: String) -> SecretBytes { SecretBytes(copying: Array(text.utf8)) }
func bytes(_ secret: SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }

@Suite struct SecretBytesTests {
    @Test func descriptionIsRedacted() {
        let value = secret("hunter2-CNRY")
        #expect(value.description == "<redacted>")
        #expect(String(describing: value) == "<redacted>")
        #expect("\(value)" == "<redacted>")
        #expect(String(reflecting: value) == "<redacted>")
    }

    @Test func equalityComparesContentAndLength() {
        #expect(secret("abc") == secret("abc"))
        #expect(!(secret("abc") == secret("abd")))
        #expect(!(secret("abc") == secret("abcd")))
        #expect(SecretBytes(zeroedCount: 0) == SecretBytes(zeroedCount: 0))
    }

    @Test func copiesAreIndependent() {
        let original = secret("abc")
        let copy = original.copy()
        copy.withUnsafeMutableBytes { $0[0] = UInt8(ascii: "x") }
        #expect(bytes(original) == Array("abc".utf8))
        #expect(bytes(copy) == Array("xbc".utf8))
    }

    @Test func hexEncodingIsLowerCase() {
        #expect(bytes(SecretBytes(copying: [0x00, 0xAB, 0xFF]).hexEncoded()) == Array("00abff".utf8))
    }

    @Test func randomSecretsDiffer() {
        #expect(!(SecretBytes(randomCount: 32) == SecretBytes(randomCount: 32)))
    }

    @Test func wipeClearsOrdinaryBuffers() {
        var buffer: [UInt8] = [1, 2, 3]
        SecretBytes.wipe(&buffer)
        #expect(buffer.isEmpty)
    }
}

@Suite struct BLAKE2bTests {
    // Reference values computed with Python's hashlib.blake2b.
    @Test func keyedHashMatchesReference() throws {
        let key = SecretBytes(copying: (0..<32).map { UInt8($0) })
        let kPin = SecretBytes(copying: [UInt8](repeating: 7, count: 32))
        let kek = try BLAKE2b.keyedHash(
            key: key, parts: [Array("ostack/pin/v1".utf8), Array("acct".utf8)], secretParts: [kPin])
        #expect(hex(bytes(kek)) == "f45d0ffab0b56eb362d293b5d7ec7d2a3fa4623f45ecff5ac57ac9030839ea34")
    }

    @Test func officialKeyedKnownAnswer() throws {
        // BLAKE2b-512 KAT: key 0x00…0x3f, empty message.
        let key = SecretBytes(copying: (0..<64).map { UInt8($0) })
        let tag = try BLAKE2b.mac(key: key, message: [], length: 64)
        #expect(hex(tag).hasPrefix("10ebb67700b1868efb4417987acf4690ae9d972fb7a590c2f02871799aaa4786"))
    }

    @Test func unkeyedHashMatchesReference() {
        #expect(
            hex(BLAKE2b.hash(Array("abc".utf8))) == "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319")
    }

    @Test func constantTimeEquality() {
        #expect(BLAKE2b.constantTimeEqual([1, 2, 3], [1, 2, 3]))
        #expect(!BLAKE2b.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        #expect(!BLAKE2b.constantTimeEqual([1, 2, 3], [1, 2]))
    }

    @Test func rejectsBadKeysAndLengths() {
        #expect(throws: SodiumError.self) { try BLAKE2b.keyedHash(key: SecretBytes(zeroedCount: 8), parts: []) }
        #expect(throws: SodiumError.self) {
            try BLAKE2b.keyedHash(key: SecretBytes(zeroedCount: 32), parts: [], length: 8)
        }
    }
}

@Suite struct AEADTests {
    let key = SecretBytes(randomCount: 32)

    @Test func roundTrip() throws {
        let box = try AEAD.seal(secret("the DEK"), key: key, associatedData: Array("acct|v1".utf8))
        #expect(box.nonce.count == 24)
        #expect(bytes(try AEAD.open(box, key: key, associatedData: Array("acct|v1".utf8))) == Array("the DEK".utf8))
        #expect(try AEAD.SealedBox(combined: box.combined) == box)
    }

    @Test func everyTamperIsDetected() throws {
        let ad = Array("acct|v1".utf8)
        let box = try AEAD.seal(secret("the DEK"), key: key, associatedData: ad)
        #expect(throws: SodiumError.authenticationFailed) {
            try AEAD.open(box, key: SecretBytes(randomCount: 32), associatedData: ad)
        }
        #expect(throws: SodiumError.authenticationFailed) {
            try AEAD.open(box, key: key, associatedData: Array("other|v1".utf8))
        }
        for index in box.ciphertext.indices {
            var flipped = box
            flipped.ciphertext[index] ^= 0x01
            #expect(throws: SodiumError.authenticationFailed) { try AEAD.open(flipped, key: key, associatedData: ad) }
        }
        var wrongNonce = box
        wrongNonce.nonce[0] ^= 0x80
        #expect(throws: SodiumError.authenticationFailed) { try AEAD.open(wrongNonce, key: key, associatedData: ad) }
    }

    @Test func noncesAreFreshPerSeal() throws {
        let a = try AEAD.seal(secret("x"), key: key, associatedData: [])
        let b = try AEAD.seal(secret("x"), key: key, associatedData: [])
        #expect(a.nonce != b.nonce)
        #expect(a.ciphertext != b.ciphertext)
    }

    /// draft-irtf-cfrg-xchacha-03, appendix A.3.1.
    @Test func draftTestVectorOpens() throws {
        let key = SecretBytes(copying: unhex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"))
        let nonce = unhex("404142434445464748494a4b4c4d4e4f5051525354555657")
        let ad = unhex("50515253c0c1c2c3c4c5c6c7")
        let ciphertext = unhex(
            "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff921f9664c97637da9768812f615c68b13b52e"
                + "c0875924c1c7987947deafd8780acf49")
        let plaintext = try AEAD.open(
            AEAD.SealedBox(nonce: nonce, ciphertext: ciphertext), key: key, associatedData: ad)
        let expected =
            "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it."
        #expect(bytes(plaintext) == Array(expected.utf8))
    }

    @Test func rejectsShortKeys() {
        #expect(throws: SodiumError.self) {
            try AEAD.seal(secret("x"), key: SecretBytes(zeroedCount: 16), associatedData: [])
        }
    }
}

@Suite struct Argon2idTests {
    func minimal(salt: [UInt8] = [UInt8](repeating: 1, count: 16)) -> Argon2id.Parameters {
        // The minimum limits keep the tests fast; production uses MODERATE.
        Argon2id.Parameters(opsLimit: 1, memLimit: 8192, salt: salt)
    }

    @Test func deterministicForTheSameRecipe() throws {
        let a = try Argon2id.deriveKey(password: secret("1234"), parameters: minimal())
        let b = try Argon2id.deriveKey(password: secret("1234"), parameters: minimal())
        #expect(a == b)
        #expect(a.count == 32)
    }

    @Test func sensitiveToPasswordSaltAndLimits() throws {
        let base = try Argon2id.deriveKey(password: secret("1234"), parameters: minimal())
        #expect(!(try Argon2id.deriveKey(password: secret("1235"), parameters: minimal()) == base))
        #expect(
            !(try Argon2id.deriveKey(
                password: secret("1234"), parameters: minimal(salt: [UInt8](repeating: 2, count: 16))) == base))
        var moreOps = minimal()
        moreOps.opsLimit = 2
        #expect(!(try Argon2id.deriveKey(password: secret("1234"), parameters: moreOps) == base))
    }

    @Test func presetsAreReadFromTheLibraryAndCarryFreshSalts() {
        let moderate = Argon2id.Parameters.moderate()
        #expect(moderate.opsLimit == 3)
        #expect(moderate.memLimit == 256 << 20)
        #expect(moderate.salt.count == 16)
        #expect(moderate.algorithm == Argon2id.algorithmID)
        #expect(Argon2id.Parameters.interactive().salt != Argon2id.Parameters.interactive().salt)
    }

    @Test func parametersRoundTripThroughCodable() throws {
        let parameters = Argon2id.Parameters.moderate()
        let data = try JSONEncoderLite.encode(parameters)
        #expect(try JSONEncoderLite.decode(Argon2id.Parameters.self, data) == parameters)
    }

    @Test func rejectsBadRecipes() {
        #expect(throws: SodiumError.self) {
            try Argon2id.deriveKey(password: secret("1"), parameters: minimal(salt: [1, 2]))
        }
        var wrongAlgorithm = minimal()
        wrongAlgorithm.algorithm = 1  // argon2i13
        #expect(throws: SodiumError.invalidParameters) {
            try Argon2id.deriveKey(password: secret("1"), parameters: wrongAlgorithm)
        }
        var tooLittleMemory = minimal()
        tooLittleMemory.memLimit = 1024
        #expect(throws: SodiumError.invalidParameters) {
            try Argon2id.deriveKey(password: secret("1"), parameters: tooLittleMemory)
        }
        #expect(throws: SodiumError.self) {
            try Argon2id.deriveKey(password: SecretBytes(zeroedCount: 0), parameters: minimal())
        }
    }
}

@Suite struct SubkeyDerivationTests {
    let master = SecretBytes(randomCount: 32)

    @Test func distinctIDsAndContextsGiveDistinctKeys() throws {
        let a = try SubkeyDerivation.derive(from: master, id: 1, context: "ostk-tok")
        let b = try SubkeyDerivation.derive(from: master, id: 2, context: "ostk-tok")
        let c = try SubkeyDerivation.derive(from: master, id: 1, context: "ostk-aud")
        #expect(!(a == b) && !(a == c) && !(b == c))
        #expect(try SubkeyDerivation.derive(from: master, id: 1, context: "ostk-tok") == a)
    }

    @Test func rejectsBadInputs() {
        #expect(throws: SodiumError.self) { try SubkeyDerivation.derive(from: master, id: 1, context: "short") }
        #expect(throws: SodiumError.self) {
            try SubkeyDerivation.derive(from: SecretBytes(zeroedCount: 16), id: 1, context: "ostk-tok")
        }
        #expect(throws: SodiumError.self) {
            try SubkeyDerivation.derive(from: master, id: 1, context: "ostk-tok", length: 8)
        }
    }
}

@Suite struct SecureRandomTests {
    @Test func uniformStaysInRange() {
        for _ in 0..<1000 { #expect(SecureRandom.uniform(7) < 7) }
    }

    @Test func bytesHaveTheRequestedLengthAndVary() {
        #expect(SecureRandom.bytes(24).count == 24)
        #expect(SecureRandom.bytes(16) != SecureRandom.bytes(16))
    }
}
