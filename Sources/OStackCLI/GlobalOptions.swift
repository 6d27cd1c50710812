import ArgumentParser

/// Options every command accepts (docs/commands.md, "Global options").
public struct GlobalOptions: ParsableArguments, Sendable {
    @Option(
        name: .long, help: ArgumentHelp("The account to use: id, alias, or email@host.", valueName: "account"),
        completion: ShellCompletions.accounts)
    public var account: String?

    @Flag(name: .long, help: "Print one JSON document on stdout (errors as JSON on stderr).")
    public var json = false

    @Flag(name: .customLong("no-input"), help: "Never prompt; fail if input would be needed.")
    public var noInput = false

    @Flag(name: .long, help: "Add HTTP status and request ids to error output.")
    public var verbose = false

    @Flag(name: .customLong("no-color"), help: "Do not use colors (also: NO_COLOR).")
    public var noColor = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Keyring backend for new accounts: secret-service (default) or file (also OSTACK_KEYRING_BACKEND).",
            valueName: "backend"))
    public var keyring: String?

    public init() {}
}
