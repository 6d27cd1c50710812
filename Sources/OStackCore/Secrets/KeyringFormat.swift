import SodiumKit

/// Versioned formats of keyring items (docs/storage.md, "Format upgrades").
///
/// Each item carries its format in the `version` attribute. Upgrading one item is: read the old
/// item, transform the secret, write it under the current version, read it back and compare, then
/// delete the old item. Every step is idempotent (an interrupted upgrade is finished by the next
/// run) and anything unexpected stops the upgrade with the old item still in place.
///
/// Format history:
/// - v0 (ostack 0.0.x): secrets stored as lower-case hex text.
/// - v1 (current): raw bytes (docs/security.md#kr-6).
public struct KeyringFormat: Sendable {
    public static let currentVersion = SecretKey.currentVersion

    public let secrets: any SecretStore

    public init(secrets: any SecretStore) {
        self.secrets = secrets
    }

    /// Upgrades every older item in `namespace`. Returns how many items were upgraded.
    @discardableResult
    public func upgrade(namespace: String) throws(OStackError) -> Int {
        var upgraded = 0
        for key in try secrets.list(namespace: namespace) where key.version < Self.currentVersion {
            try upgrade(key)
            upgraded += 1
        }
        return upgraded
    }

    func upgrade(_ old: SecretKey) throws(OStackError) {
        var current = old
        current.version = Self.currentVersion
        guard let value = try secrets.read(old) else { return }  // already finished by another run
        let converted = try Self.convert(value, from: old.version)
        if let existing = try secrets.read(current) {
            // A previous run copied it; finish only if it is the same secret.
            guard existing == converted else {
                throw OStackError(
                    .unsupportedFormat, detail: "keyring item v\(old.version) and v\(current.version) differ")
            }
        } else {
            try secrets.write(converted, for: current)
        }
        FailPoint.hit("keyring-format.after-copy")
        guard let readBack = try secrets.read(current), readBack == converted else {
            throw OStackError(.keyringUnavailable, detail: "upgraded keyring item did not read back")
        }
        try secrets.delete(old)
    }

    /// The secret in the current format.
    static func convert(_ value: SecretBytes, from version: Int) throws(OStackError) -> SecretBytes {
        switch version {
        case 0:
            // Hex text → raw bytes, without leaving secret memory.
            guard value.count % 2 == 0 else {
                throw OStackError(.unsupportedFormat, detail: "keyring item v0 is not hex")
            }
            var valid = true
            let raw = SecretBytes(count: value.count / 2) { out in
                value.withUnsafeBytes { hex in
                    for index in 0..<out.count {
                        guard let high = Self.nibble(hex[2 * index]), let low = Self.nibble(hex[2 * index + 1]) else {
                            valid = false
                            return
                        }
                        out[index] = high << 4 | low
                    }
                }
            }
            guard valid else { throw OStackError(.unsupportedFormat, detail: "keyring item v0 is not hex") }
            return raw
        case currentVersion:
            return value
        default:
            throw OStackError(.unsupportedFormat, detail: "unknown keyring item version \(version)")
        }
    }

    static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 48...57: byte - 48
        case 97...102: byte - 87
        default: nil
        }
    }
}

extension SecretStore {
    /// Reads `key`; when it is missing, upgrades older-format items of its namespace first (lazy
    /// format migration: free on the normal path).
    public func readUpgrading(_ key: SecretKey) throws(OStackError) -> SecretBytes? {
        if let value = try read(key) { return value }
        guard try KeyringFormat(secrets: self).upgrade(namespace: key.namespace) > 0 else { return nil }
        return try read(key)
    }
}
