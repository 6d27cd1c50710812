import ArgumentParser
import OStackCore

/// `ostack config get|set|list`
struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config", abstract: "Read and change settings.",
        subcommands: [ConfigList.self, ConfigGet.self, ConfigSet.self], defaultSubcommand: ConfigList.self)
}

struct ConfigEntry: Encodable {
    var key: String
    var value: String
    var isDefault: Bool
    /// False for a value written into config.json by hand that ostack cannot use (omitted when valid).
    var valid: Bool?
}

struct ConfigList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Every setting and its value.")
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let configuration = try context.configuration.load()
            let invalid = Set(configuration.invalidSettings.map(\.key))
            let entries = Setting.all.map { setting in
                let stored = configuration.settings[setting.key]
                return ConfigEntry(
                    key: setting.key, value: stored ?? setting.defaultValue, isDefault: stored == nil,
                    valid: invalid.contains(setting.key) ? false : nil)
            }
            struct Document: Encodable { var settings: [ConfigEntry] }
            context.emit(json: Document(settings: entries)) { () -> String in
                // A table marks defaults in an unnamed column; tsv and csv name it and fill every cell.
                let table = context.terminal.defaultFormat == .table
                return Table(
                    headers: ["key", "value", table ? "" : "source"],
                    rows: entries.map {
                        [
                            $0.key, $0.value,
                            $0.valid == false
                                ? (table ? "(not valid)" : "invalid")
                                : table ? ($0.isDefault ? "(default)" : "") : ($0.isDefault ? "default" : "set"),
                        ]
                    }
                ).render(terminal: context.terminal)
            }
        }
    }
}

struct ConfigGet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Print one setting.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The setting, e.g. agent.idle-timeout.") var key: String

    func run() async throws {
        try await CommandRunner.run(global) { context in
            // A value ostack cannot use is refused by name, with what it takes (`config list` shows it).
            let configuration = try context.configuration.load()
            let value = try configuration.validValue(of: key)
            let isDefault = configuration.settings[key] == nil
            // A value is text the user (or a hand-edited config.json) gave: shown through the sanitiser.
            context.emit(
                json: ConfigEntry(key: key, value: value, isDefault: isDefault),
                human: ErrorPresenter.sanitize(value, maxLength: Int.max))
        }
    }
}

struct ConfigSet: AsyncParsableCommand {
    // The usage names one value (the argument collects every word so that `-5` reaches the
    // setting's own check; the parser's generated line said `[<value> ...]`).
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Change one setting (--unset restores its default).",
        usage: "ostack config set <key> <value>\nostack config set <key> --unset")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The setting.") var key: String
    /// Every word after the key that is not one of the command's options: a value may start with
    /// '-' (`-5`), which the parser would otherwise take for an unknown option and drop, leaving
    /// "Give a value"; the setting's own check then says what it takes.
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("The new value.", valueName: "value"))
    var values: [String] = []
    @Flag(name: .long, help: "Restore the default.") var unset = false

    /// The words given as the value (a `--` before it, as in `config set sync.interval -- -5`, ends
    /// the options and is not one of them).
    var words: [String] { values.first == "--" ? Array(values.dropFirst()) : values }
    var value: String? { words.first }

    func validate() throws {
        if words.count > 1 {
            // An unknown option: a word after the value starting with '-', or a first word starting
            // with '--' followed by another (`--jsn 5m` said "Give one value").
            let unknown = words.enumerated().first { $0.element.hasPrefix($0.offset == 0 ? "--" : "-") }?.element
            if let unknown {
                throw ValidationError("Unknown option '\(ErrorPresenter.sanitize(unknown, maxLength: 40))'.")
            }
            throw ValidationError("Give one value (quote a value with spaces).")
        }
        if unset == (value != nil) { throw ValidationError("Give a value, or --unset.") }
    }

    func run() async throws {
        try await CommandRunner.run(global) { context in
            try context.configuration.set(key, to: unset ? nil : value)
            let (current, isDefault) = try context.configuration.value(of: key)
            // A shorter agent timeout applies at once to the accounts already unlocked (they kept
            // the limits of their unlock); a longer one from their next unlock. Best effort: the
            // setting is saved either way.
            // (The other limit, if not valid, counts as its default, as it did before it was checked:
            // a bad value beside it must not keep the new, shorter one from applying.)
            if key == AgentLimits.idleSetting || key == AgentLimits.lifetimeSetting,
                let limits = (try? context.configuration.load()).map(AgentLimits.eachValidOrDefault)
            {
                let agent = AgentClient(
                    layout: context.layout, namespaces: KeyringNamespaces(environment: context.environment))
                try? agent.shorten(to: limits)
            }
            context.emit(
                json: ConfigEntry(key: key, value: current, isDefault: isDefault),
                human: ErrorPresenter.sanitize("\(key) = \(current)", maxLength: Int.max))
        }
    }
}
