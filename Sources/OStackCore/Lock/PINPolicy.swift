import SodiumKit

/// What a PIN may be (docs/security.md#pin-2): 4–64 characters; trivial digit PINs (repeated digits,
/// straight sequences, the most common PINs) are refused. Longer passphrases are encouraged.
public enum PINPolicy {
    static let common: Set<String> = [
        "1212", "2580", "1122", "6969", "1004", "2000", "4444", "2222", "1313", "5683", "0852", "112233",
        "121212", "123123", "159753", "696969", "654321", "147258", "789456", "520520",
    ]

    public static func validate(_ pin: PIN) throws(OStackError) {
        let length = pin.bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self).count }
        guard (4...64).contains(length) else {
            throw OStackError(.invalidInput, context: .init(suggestion: "A PIN has 4 to 64 characters."))
        }
        let digits: [UInt8]? = pin.bytes.withUnsafeBytes { bytes in
            bytes.allSatisfy { (48...57).contains($0) } ? bytes.map { $0 - 48 } : nil
        }
        guard let digits else { return }
        let text = String(digits.map { Character(String($0)) })
        let steps = zip(digits.dropFirst(), digits).map { Int($0) - Int($1) }
        let repeated = Set(digits).count == 1
        let sequence = steps.allSatisfy { $0 == 1 } || steps.allSatisfy { $0 == -1 }
        if repeated || sequence || common.contains(text) {
            throw OStackError(
                .invalidInput,
                context: .init(suggestion: "That PIN is too easy to guess; choose another or a passphrase."))
        }
    }
}
