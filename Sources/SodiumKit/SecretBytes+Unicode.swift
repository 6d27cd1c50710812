extension SecretBytes {
    /// These bytes in Unicode normalisation form C, when they are UTF-8 text not already in it; nil
    /// for ASCII (one form only), bytes that are not UTF-8 (nothing to normalise) and text already
    /// in NFC. For a passphrase typed through an input method, a terminal or a password manager
    /// that sends `é` as `e` + U+0301 (docs/security.md#pin-7). The text passes through a `String`
    /// on the way, which cannot be wiped; callers read such secrets through one already.
    public var composedUTF8: SecretBytes? {
        withUnsafeBytes { typed -> SecretBytes? in
            guard !typed.allSatisfy({ $0 < 0x80 }), let text = String(validating: typed, as: UTF8.self) else {
                return nil
            }
            var units = Array(text._nfcCodeUnits)
            defer { SecretBytes.wipe(&units) }
            return units.elementsEqual(typed) ? nil : SecretBytes(copying: units)
        }
    }

    /// These bytes in NFC: `composedUTF8`, or these bytes themselves when they need no composing.
    public var composed: SecretBytes { composedUTF8 ?? self }
}
