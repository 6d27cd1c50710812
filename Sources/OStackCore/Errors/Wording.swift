/// Our own words for the user — an error's hint (`OStackError.Context.suggestion`), a doctor check's
/// message and fix, a setting's summary — in which commands are named by value, never spelled.
///
/// The core knows *which* command helps (`CommandSuggestion`); only the CLI knows how it is typed
/// (`ostack …`), so the core never writes CLI syntax. Build it from a string literal, with commands
/// interpolated by label: `"Account \(alias) has no PIN: set one with \(command: .pinSet)."`.
/// Adjacent text is merged, so equal wording built either way compares equal.
public struct Wording: Sendable, Hashable {
    public enum Part: Sendable, Hashable {
        /// Our own prose. Never server text other than allowlisted metadata (field names, labels).
        case text(String)
        case command(CommandSuggestion)
    }

    public private(set) var parts: [Part]

    public init(parts: [Part] = []) {
        self.parts = []
        for part in parts { append(part) }
    }

    /// Prose that names no command.
    public static func text(_ text: String) -> Wording { Wording(parts: [.text(text)]) }

    /// "Run <command>."
    public static func run(_ command: CommandSuggestion) -> Wording { "Run \(command: command)." }

    /// "See <command>."
    public static func see(_ command: CommandSuggestion) -> Wording { "See \(command: command)." }

    /// The commands named, in order.
    public var commands: [CommandSuggestion] {
        parts.compactMap { part in
            if case .command(let command) = part { return command }
            return nil
        }
    }

    /// The wording as one string, each command written by `spell` (the CLI passes its spelling).
    public func rendered(spellingCommands spell: (CommandSuggestion) -> String) -> String {
        parts.map { part in
            switch part {
            case .text(let text): text
            case .command(let command): spell(command)
            }
        }.joined()
    }

    mutating func append(_ part: Part) {
        switch part {
        case .text(let text):
            guard !text.isEmpty else { return }
            if case .text(let previous) = parts.last {
                parts[parts.count - 1] = .text(previous + text)
            } else {
                parts.append(part)
            }
        case .command:
            parts.append(part)
        }
    }
}

extension Wording: ExpressibleByStringInterpolation {
    public struct StringInterpolation: StringInterpolationProtocol {
        var wording = Wording()

        public init(literalCapacity: Int, interpolationCount: Int) {}

        public mutating func appendLiteral(_ literal: String) { wording.append(.text(literal)) }

        /// A value shown as text (a count, an alias, a field label).
        public mutating func appendInterpolation(_ value: some CustomStringConvertible) {
            wording.append(.text(value.description))
        }

        /// A command of ours; the CLI spells it.
        public mutating func appendInterpolation(command: CommandSuggestion) {
            wording.append(.command(command))
        }

        /// Other wording, commands included.
        public mutating func appendInterpolation(_ other: Wording) {
            for part in other.parts { wording.append(part) }
        }
    }

    public init(stringLiteral value: String) {
        self = .text(value)
    }

    public init(stringInterpolation: StringInterpolation) {
        self = stringInterpolation.wording
    }
}

/// A command of ours that a hint points at. The CLI spells each one (`ostack …`); a test renders
/// every case. Values shown (an alias, an object name) are ours or allowlisted metadata.
public enum CommandSuggestion: Sendable, Hashable {
    /// `login`, or `login --account A`.
    case login(account: String?)
    /// `login --organization ID` (the id is a placeholder).
    case loginOrganization
    case authRefresh
    /// `unlock`, or `unlock A`.
    case unlock(account: String?)
    /// `unlock A --recovery-key` (after a PIN lockout, or without pin.env).
    case unlockWithRecoveryKey(account: String)
    case pinSet
    case pinChange
    case sync
    /// `sync --watch`.
    case syncWatch
    case queueList
    case queueRetry
    /// `queue discard ID` (the id is a placeholder).
    case queueDiscard
    case conflictsList
    case conflictsResolve
    case auditVerify
    /// `audit --all`.
    case auditAll
    case accountsRemove(account: String)
    case logout(account: String)
    case objectsShow(object: String)
    case syncTrack(object: String)
    case recordsUpdate
    case doctor
    /// `keyring migrate --to BACKEND ACCOUNT`.
    case keyringMigrate(backend: String, account: String)
    /// `config set KEY --unset`.
    case configUnset(key: String)
    /// `config set KEY VALUE` (the value a placeholder, named `placeholder`).
    case configSet(key: String, placeholder: String)
}
