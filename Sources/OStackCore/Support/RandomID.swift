import SodiumKit

/// Random identifiers from the CSPRNG (libsodium): account directory names, queue ids, record ids,
/// error reference ids. Every character is uniform over its alphabet: a random byte is used modulo
/// the alphabet size, and bytes of the incomplete last round are drawn again (none for alphabets of
/// 16 or 32 symbols).
public enum RandomID {
    /// Lower-case hexadecimal digits.
    public static let hexDigits = "0123456789abcdef"

    /// `prefix` followed by `count` characters drawn from `alphabet` (ASCII, 2 to 256 symbols).
    public static func make(prefix: String = "", count: Int, alphabet: String) -> String {
        let symbols = Array(alphabet.utf8)
        precondition((2...256).contains(symbols.count) && symbols.allSatisfy { $0 < 0x80 }, "bad id alphabet")
        let limit = 256 - 256 % symbols.count
        var text = Array(prefix.utf8)
        text.reserveCapacity(text.count + count)
        var left = count
        while left > 0 {
            for byte in SecureRandom.bytes(left) where Int(byte) < limit {
                text.append(symbols[Int(byte) % symbols.count])
                left -= 1
            }
        }
        return String(decoding: text, as: UTF8.self)
    }
}
