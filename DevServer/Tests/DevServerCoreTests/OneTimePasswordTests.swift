@testable import DevServerCore
import Testing

@Suite struct OneTimePasswordTests {
    func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    @Test func sha1KnownAnswers() {
        #expect(hex(OneTimePassword.sha1([])) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(hex(OneTimePassword.sha1(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        let long = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        #expect(hex(OneTimePassword.sha1(Array(long.utf8))) == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
    }

    @Test func hmacSHA1RFC2202() {
        let key = [UInt8](repeating: 0x0B, count: 20)
        #expect(
            hex(OneTimePassword.hmacSHA1(key: key, message: Array("Hi There".utf8)))
                == "b617318655057264e28bc0b6fb378c8ef146be00")
        #expect(
            hex(OneTimePassword.hmacSHA1(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8)))
                == "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
        let longKey = [UInt8](repeating: 0xAA, count: 80)
        let message = "Test Using Larger Than Block-Size Key - Hash Key First"
        #expect(
            hex(OneTimePassword.hmacSHA1(key: longKey, message: Array(message.utf8)))
                == "aa4ae5e15272d00e95705637ce8a3b55ed402112")
    }

    /// RFC 6238 Appendix B, SHA-1 column (8 digits, seed "12345678901234567890").
    @Test(arguments: [
        (59.0, "94287082"), (1_111_111_109.0, "07081804"), (1_111_111_111.0, "14050471"),
        (1_234_567_890.0, "89005924"), (2_000_000_000.0, "69279037"), (20_000_000_000.0, "65353130"),
    ])
    func rfc6238Vectors(time: Double, expected: String) {
        let key = Array("12345678901234567890".utf8)
        #expect(OneTimePassword.totp(key: key, time: time, digits: 8) == expected)
    }

    @Test func base32AndDriftWindow() throws {
        // "12345678901234567890" in Base32.
        let key = try #require(OneTimePassword.base32Decode("GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"))
        #expect(key == Array("12345678901234567890".utf8))
        #expect(OneTimePassword.base32Decode("not base32!") == nil)
        let now = 1_234_567_890.0
        let code = OneTimePassword.totp(key: key, time: now)
        #expect(code == "005924")
        #expect(OneTimePassword.verifyTOTP(code, key: key, time: now + 30))
        #expect(OneTimePassword.verifyTOTP(code, key: key, time: now - 30))
        #expect(!OneTimePassword.verifyTOTP(code, key: key, time: now + 90))
        #expect(!OneTimePassword.verifyTOTP("12345", key: key, time: now))
    }
}
