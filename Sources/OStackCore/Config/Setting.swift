import PlatformKit

/// The settings `ostack config get|set|list` knows, each validated before it is stored.
public struct Setting: Sendable, Equatable {
    public var key: String
    /// Shown in the hint when a value is refused.
    public var summary: Wording
    public var defaultValue: String
    /// What a value must be, said when one is refused.
    public var accepts: String
    let isValid: @Sendable (String) -> Bool
    /// How to repair a stored value that is not valid, when restoring the default is the wrong
    /// advice (nil: "It takes …; run `config set KEY --unset`").
    var repair: Wording? = nil

    public static func == (lhs: Setting, rhs: Setting) -> Bool { lhs.key == rhs.key }

    public static let all: [Setting] = [
        Setting(
            key: "keyring.backend", summary: "Keyring backend for new accounts (secret-service or file).",
            defaultValue: "secret-service", accepts: "secret-service or file",
            isValid: { ["secret-service", "file"].contains($0) }),
        Setting(
            key: AgentLimits.idleSetting,
            summary: "Lock unlocked accounts after this much idle time (e.g. 15m, 1h).",
            defaultValue: AgentLimits.defaultIdleText, accepts: Setting.durationForm,
            isValid: { Setting.duration($0) != nil }),
        Setting(
            key: AgentLimits.lifetimeSetting, summary: "Lock unlocked accounts after this long regardless of use.",
            defaultValue: AgentLimits.defaultLifetimeText, accepts: Setting.durationForm,
            isValid: { Setting.duration($0) != nil }),
        Setting(
            key: "sync.interval", summary: "Interval of \(command: .syncWatch).", defaultValue: "5m",
            accepts: Setting.durationForm, isValid: { Setting.duration($0) != nil }),
        Setting(
            key: "sync.lookback",
            summary:
                "How far before its cursor a pull starts again, so that changes a server stamps late are still pulled (0s: not at all).",
            defaultValue: "5s", accepts: "0s, or a duration up to 1d: a number with s, m, h or d (5s, 2m)",
            isValid: { Setting.lookback($0) != nil }),
        Setting(
            key: "tls.ca-file",
            summary:
                "A PEM file of certificate authorities to trust instead of the system's (a private CA), as an absolute path.",
            defaultValue: "", accepts: "the absolute path of a file that exists",
            isValid: {
                $0.isEmpty || ($0.hasPrefix("/") && !$0.contains("\u{0}") && SecureFileSystem.size(of: $0) != nil)
            },
            // A CA file that went missing (moved, on a disk not mounted) is put back, not unset:
            // unset, the system's CAs would be trusted instead of the private one.
            repair:
                "It must be the absolute path of a CA file that exists. Point it at yours with \(command: .configSet(key: "tls.ca-file", placeholder: "PATH")) (unset, the system's CAs are trusted instead)."
        ),
        Setting(
            key: "locale",
            summary: "Language of labels from the server, sent as Accept-Language (auto: from LANG; e.g. de, fr-CA).",
            defaultValue: "auto", accepts: "auto or a language tag (de, fr-CA)",
            isValid: { $0 == "auto" || Setting.languageTag($0) != nil }),
    ]

    static let durationForm = "a duration from 1s to 30d: a number with s, m, h or d (90s, 15m, 1.5h, 1d)"

    /// A BCP 47-like language tag (`de`, `fr-CA`, `zh-Hant-TW`), normalised; nil when it is not one.
    public static func languageTag(_ text: String) -> String? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard let first = parts.first, (2...8).contains(first.count), first.allSatisfy({ $0.isASCII && $0.isLetter }),
            parts.count <= 4,
            parts.dropFirst().allSatisfy({
                (1...8).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
            })
        else { return nil }
        return parts.joined(separator: "-")
    }

    /// The locale for `Accept-Language`: the setting, or with `auto` the process's `LC_ALL`, `LC_MESSAGES`
    /// or `LANG` (`de_DE.UTF-8` → `de-DE`; `C` and `POSIX` → none).
    public static func acceptLanguage(setting: String, environment: [String: String]) -> String? {
        if setting != "auto" { return languageTag(setting) }
        for key in ["LC_ALL", "LC_MESSAGES", "LANG"] {
            guard let value = environment[key], !value.isEmpty else { continue }
            let base = value.split(separator: ".").first.map(String.init) ?? value
            if base == "C" || base == "POSIX" { return nil }
            return languageTag(base.replacing("_", with: "-"))
        }
        return nil
    }

    public static func named(_ key: String) throws(OStackError) -> Setting {
        guard let setting = all.first(where: { $0.key == key }) else {
            throw OStackError(
                .invalidInput, context: .init(suggestion: "Known settings: \(all.map(\.key).joined(separator: ", "))."))
        }
        return setting
    }

    /// Parses `90`, `90s`, `15m`, `12h`, `1d` into seconds (1 s … 30 days).
    /// `sync.lookback` in milliseconds: 0 (`0`, `0s`) or a duration up to a day.
    public static func lookback(_ text: String) -> Int64? {
        if text == "0" || text == "0s" { return 0 }
        guard let seconds = duration(text), seconds <= 86_400 else { return nil }
        return Int64(seconds * 1000)
    }

    public static func duration(_ text: String) -> Double? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var number = Substring(text)
        var factor = 1.0
        if let last = text.last, let unit = units[last] {
            factor = unit
            number = text.dropLast()
        }
        guard let value = Double(number), value > 0 else { return nil }
        let seconds = value * factor
        return (1...(30 * 86_400)).contains(seconds) ? seconds : nil
    }
}

extension ConfigurationStore {
    /// The value of a known setting (the default when unset).
    public func value(of key: String) throws(OStackError) -> (value: String, isDefault: Bool) {
        let setting = try Setting.named(key)
        if let stored = try load().settings[key] { return (stored, false) }
        return (setting.defaultValue, true)
    }

    /// Validates and stores a setting; `nil` resets it to its default.
    public func set(_ key: String, to value: String?) throws(OStackError) {
        let setting = try Setting.named(key)
        if let value, !setting.isValid(value) {
            throw OStackError(
                .invalidInput,
                context: .init(suggestion: "\(key) takes \(setting.accepts); '\(value)' is not one."))
        }
        try update { $0.settings[key] = value }
    }
}

extension Setting {
    /// The error for a stored value of this setting that is not valid (config.json edited by hand).
    public var invalidError: OStackError {
        let suggestion = repair ?? "It takes \(accepts). Run \(command: .configUnset(key: key)) to restore its default."
        return OStackError(
            .invalidSetting, context: .init(object: key, suggestion: suggestion), detail: "invalid setting \(key)")
    }
}

extension Configuration {
    /// Known settings whose stored value is not valid (a hand-edited config.json), in `Setting.all`
    /// order. `config set` never stores one.
    public var invalidSettings: [Setting] {
        Setting.all.filter { setting in settings[setting.key].map { !setting.isValid($0) } ?? false }
    }

    /// Stored keys that are no setting of ostack's (ignored).
    public var unknownSettings: [String] {
        settings.keys.filter { key in !Setting.all.contains { $0.key == key } }.sorted()
    }

    /// Refuses the first setting whose stored value is not valid: a command that uses the keyring or
    /// the server stops with `invalid-setting` rather than quietly using the default (a longer agent
    /// timeout than the one the user wrote, the system's CAs instead of a private one).
    public func checkSettings() throws(OStackError) {
        if let setting = invalidSettings.first { throw setting.invalidError }
    }

    /// The value of a known setting, valid: the stored one, else the default.
    public func validValue(of key: String) throws(OStackError) -> String {
        let setting = try Setting.named(key)
        guard let stored = settings[key] else { return setting.defaultValue }
        guard setting.isValid(stored) else { throw setting.invalidError }
        return stored
    }
}
