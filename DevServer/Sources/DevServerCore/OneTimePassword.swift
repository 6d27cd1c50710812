/// SHA-1, HMAC-SHA1, Base32 and RFC 6238 TOTP — just enough for the dev server's two-factor sign-in
/// (better-auth's `twoFactor` plugin: HMAC-SHA1, 30-second period, 6 digits, one step of drift either
/// way). Not for production cryptography.
public enum OneTimePassword {
    /// SHA-1 (FIPS 180-4) of `message`: 20 bytes.
    public static func sha1(_ message: [UInt8]) -> [UInt8] {
        var h: [UInt32] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0]
        var padded = message
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        let bitLength = UInt64(message.count) &* 8
        for shift in stride(from: 56, through: 0, by: -8) {
            padded.append(UInt8(truncatingIfNeeded: bitLength >> shift))
        }
        var w = [UInt32](repeating: 0, count: 80)
        for chunk in stride(from: 0, to: padded.count, by: 64) {
            for i in 0..<16 {
                let j = chunk + i * 4
                w[i] =
                    UInt32(padded[j]) << 24 | UInt32(padded[j + 1]) << 16 | UInt32(padded[j + 2]) << 8
                    | UInt32(padded[j + 3])
            }
            for i in 16..<80 { w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1) }
            var (a, b, c, d, e) = (h[0], h[1], h[2], h[3], h[4])
            for i in 0..<80 {
                let (f, k): (UInt32, UInt32)
                switch i {
                case 0..<20: (f, k) = ((b & c) | (~b & d), 0x5A82_7999)
                case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
                case 40..<60: (f, k) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
                }
                let temp = rotl(a, 5) &+ f &+ e &+ k &+ w[i]
                (e, d, c, b, a) = (d, c, rotl(b, 30), a, temp)
            }
            h[0] &+= a
            h[1] &+= b
            h[2] &+= c
            h[3] &+= d
            h[4] &+= e
        }
        return h.flatMap { word in [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: word >> $0) } }
    }

    static func rotl(_ value: UInt32, _ count: UInt32) -> UInt32 { value << count | value >> (32 - count) }

    /// HMAC-SHA1 (RFC 2104).
    public static func hmacSHA1(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var block = key.count > 64 ? sha1(key) : key
        block += [UInt8](repeating: 0, count: 64 - block.count)
        let inner = sha1(block.map { $0 ^ 0x36 } + message)
        return sha1(block.map { $0 ^ 0x5C } + inner)
    }

    /// RFC 4648 Base32 (case-insensitive, padding and spaces ignored); nil for other characters.
    public static func base32Decode(_ text: String) -> [UInt8]? {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var bytes: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for character in text.uppercased() where character != "=" && character != " " {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            buffer = buffer << 5 | UInt32(value)
            bits += 5
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        return bytes
    }

    /// HOTP (RFC 4226) of `counter` with dynamic truncation, `digits` long, zero-padded.
    public static func hotp(key: [UInt8], counter: UInt64, digits: Int = 6) -> String {
        let message = (0..<8).map { UInt8(truncatingIfNeeded: counter >> (56 - 8 * UInt64($0))) }
        let mac = hmacSHA1(key: key, message: message)
        let offset = Int(mac[19] & 0x0F)
        let binary =
            UInt32(mac[offset] & 0x7F) << 24 | UInt32(mac[offset + 1]) << 16 | UInt32(mac[offset + 2]) << 8
            | UInt32(mac[offset + 3])
        var modulus: UInt32 = 1
        for _ in 0..<digits { modulus *= 10 }
        let code = String(binary % modulus)
        return String(repeating: "0", count: max(0, digits - code.count)) + code
    }

    /// TOTP (RFC 6238) at `time` seconds since the epoch.
    public static func totp(key: [UInt8], time: Double, period: Double = 30, digits: Int = 6) -> String {
        hotp(key: key, counter: UInt64(max(0, time / period).rounded(.down)), digits: digits)
    }

    /// Whether `code` is the TOTP for `time`, or for one period before or after it.
    public static func verifyTOTP(_ code: String, key: [UInt8], time: Double, period: Double = 30, digits: Int = 6)
        -> Bool
    {
        guard code.count == digits, code.allSatisfy(\.isNumber) else { return false }
        return [-period, 0, period].contains { totp(key: key, time: time + $0, period: period, digits: digits) == code }
    }
}
