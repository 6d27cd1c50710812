import ArgumentParser
import OStackCore
import SodiumKit

/// `ostack login` — passwords and API keys come from a no-echo prompt or stdin, never argv.
struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Sign in to an ObjectStack server and add (or refresh) the account.",
        discussion: """
            The password (or API key) is read from a prompt without echo, or from stdin with \
            --password-stdin / --api-key-stdin. It is never accepted as an argument.
            """)

    @OptionGroup var global: GlobalOptions
    @Option(help: "Server URL or host (default: the last server used).") var server: String?
    @Option(help: "E-mail address to sign in with.") var email: String?
    @Flag(name: .customLong("password-stdin"), help: "Read the password from stdin.") var passwordStdin = false
    @Flag(name: .customLong("api-key-stdin"), help: "Read an API key (osk_…) from stdin instead of a password.")
    var apiKeyStdin = false
    @Option(help: "Alias for a new account (default: the e-mail's local part).") var alias: String?
    @Flag(name: .customLong("no-switch"), help: "Do not make this the default account.") var noSwitch = false
    @Flag(name: .customLong("allow-insecure-http"), help: "Allow plain http:// to a non-local server.")
    var allowInsecureHTTP = false
    @Option(
        name: .customLong("totp"),
        help: "A two-factor code from your authenticator app (asked for on a terminal when needed).")
    var totp: String?
    @Option(
        name: .customLong("backup-code"),
        help: "A two-factor backup code (each works once; --backup-code-stdin keeps it out of the process list).")
    var backupCode: String?
    @Flag(
        name: .customLong("backup-code-stdin"),
        help: "Read a two-factor backup code from stdin (after the password's line with --password-stdin).")
    var backupCodeStdin = false
    @Option(help: "Work in this environment of the server (its own account context).") var environment: String?
    @Option(help: "Work in this organization (its own account context); see `ostack org list`.")
    var organization: String?
    @Flag(
        name: .customLong("rebuild-local-data"),
        help: "After a PIN lockout: rebuild this account's local data from the server (unsynced changes are lost).")
    var rebuildLocalData = false

    func validate() throws {
        if passwordStdin && apiKeyStdin {
            throw ValidationError("Use either --password-stdin or --api-key-stdin, not both.")
        }
        if [totp != nil, backupCode != nil, backupCodeStdin].filter({ $0 }).count > 1 {
            throw ValidationError("Pass one of --totp, --backup-code and --backup-code-stdin.")
        }
        if apiKeyStdin && (totp != nil || backupCode != nil || backupCodeStdin) {
            throw ValidationError("An API key needs no two-factor code.")
        }
    }

    func run() async throws {
        // Only a sign-in can use --keyring file, so only its "no keyring" hint suggests it.
        let keyringHint = { (error: OStackError) -> OStackError in
            guard error.code == .keyringUnavailable, global.keyring != "file" else { return error }
            var error = error
            error.context.suggestion =
                "Start a desktop keyring such as gnome-keyring, or sign in with the encrypted file backend: add --keyring file."
            return error
        }
        try await CommandRunner.run(global, unlockOnDemand: false, adjust: keyringHint) { context in
            let environment = try context.authEnvironment()
            // `login --account A` (the hint a signed-out or expired account gives): A's server and
            // e-mail unless given; it used to sign in the last server's account instead.
            let named = try global.account.flatMap { try context.accounts(target: $0, all: false).first }
            guard
                let serverInput = try server ?? named?.server.absoluteString ?? context.configuration.load().lastServer
                    ?? SecretInput.promptVisible("Server: ", noInput: global.noInput)
            else {
                throw OStackError(.inputRequired, context: .init(suggestion: "Pass --server URL."))
            }
            let url = try ServerURL(parsing: serverInput, allowInsecureHTTP: allowInsecureHTTP)
            let credential: LoginCredential
            var address = email ?? named?.email ?? ""
            if apiKeyStdin {
                credential = .apiKey(try SecretInput.fromStdin())
            } else {
                if address.isEmpty {
                    address = SecretInput.promptVisible("E-mail: ", noInput: global.noInput) ?? ""
                }
                guard !address.isEmpty else {
                    throw OStackError(.inputRequired, context: .init(suggestion: "Pass --email ADDRESS."))
                }
                credential = .password(
                    passwordStdin
                        ? try SecretInput.fromStdin() : try SecretInput.prompt(
                            "Password: ", noInput: global.noInput, flag: "--password-stdin (or --api-key-stdin)"))
            }
            var request = LoginService.Request(
                server: url, email: address, credential: credential, alias: alias, makeDefault: !noSwitch)
            request.rebuildLockedOutData = rebuildLocalData
            request.environment = self.environment
            request.organization = organization
            // The backup code's line follows the password's when both come from stdin.
            let stdinBackupCode = backupCodeStdin ? try SecretInput.fromStdin() : nil
            request.twoFactor = TwoFactorInput(
                totp: totp.map { SecretBytes(copying: Array($0.utf8)) },
                backupCode: stdinBackupCode ?? backupCode.map { SecretBytes(copying: Array($0.utf8)) })
            let noInput = global.noInput
            let who = address
            request.twoFactor.prompt = { _ in
                try? SecretInput.prompt(
                    "Two-factor code for \(who) (authenticator app): ", noInput: noInput, flag: "--totp CODE")
            }
            let account: Account
            do {
                account = try LoginService(environment: environment).login(request)
            } catch let error as OStackError where error.code == .pinLockedOut && !rebuildLocalData {
                // Ask before dropping local data (docs/security.md#pin-4): say what would be lost.
                let counted =
                    try context.accounts(target: error.context.account, all: false).first.flatMap {
                        try context.unsyncedChanges($0)
                    }
                let lost = counted.map { "\($0) unsynced change\($0 == 1 ? "" : "s")" } ?? "any unsynced changes"
                guard !global.noInput,
                    let answer = SecretInput.promptVisible(
                        "The PIN of this account was locked out. Signing in again rebuilds its local data from the "
                            + "server; \(lost) would be lost. Continue? [y/N] ",
                        noInput: global.noInput),
                    answer.lowercased().hasPrefix("y")
                else {
                    throw OStackError(
                        .pinLockedOut, context: .init(account: error.context.account),
                        detail: "rebuild declined")
                }
                request.rebuildLockedOutData = true
                account = try LoginService(environment: environment).login(request)
            }
            let service = context.accountsService()
            let defaultAccount = try service.configuration.load().defaultAccount
            let summary = service.summary(of: account, defaultAccount: defaultAccount)
            struct Document: Encodable { var account: AccountDocument }
            // Say when signing in changed the default account (`--no-switch` keeps it).
            let isDefault = defaultAccount == account.id
            context.emit(
                json: Document(account: AccountDocument(summary)),
                human: ErrorPresenter.sanitize(
                    "Signed in to \(account.server.authority) as \(account.email) (account \(account.alias))."
                        + (isDefault ? " It is now the default account." : ""),
                    maxLength: 400))
        }
    }
}
