import ArgumentParser
import OStackCore

/// `ostack logout [ACCOUNT|--all]` — the account stays, with its data, as "signed out".
struct Logout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout", abstract: "Sign out: delete the session token, keep the data.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var selection: AccountArgument
    @Flag(name: .long, help: "Sign out of every account.") var all = false

    func validate() throws {
        if all && (selection.target != nil || global.account != nil) {
            throw ValidationError("Pass an account (or --account) or --all, not both.")
        }
    }

    func run() async throws {
        try await CommandRunner.run(global) { context in
            var context = context
            context.checksSettings = false  // signing out works whatever config.json holds
            let environment = try context.authEnvironment()
            let accounts = try context.accounts(target: selection.target, all: all)
            var documents: [AccountDocument] = []
            var lines: [String] = []
            // Signing out keeps the account the default: the document says so (it said false).
            let defaultAccount = try context.accountsService().configuration.load().defaultAccount
            // `--all` asks every account, signed out ones too: one may still hold a credential (an
            // older sign-in's, a copy the registry does not know of), and only the keyring can say.
            // Those with nothing to delete are passed over quietly.
            // One account that cannot be signed out (locked: its token is sealed) does not stop
            // `--all` before the others: it is named, and its error is the command's.
            var firstError: OStackError?
            for account in accounts {
                let outcome: LogoutService.Outcome
                do {
                    outcome = try LogoutService(environment: environment).logout(account)
                } catch let error as OStackError
                    where all && account.sessionState == .signedOut
                    && [OStackError.Code.inputRequired, .wrongPassphrase, .keyringLocked, .keyringUnavailable,
                        .keyringTimeout].contains(error.code)
                {
                    continue  // its keyring cannot be read now (a file keyring under --no-input): as before
                } catch let error as OStackError where all {
                    firstError = firstError ?? error
                    lines.append(
                        ErrorPresenter.sanitize(
                            "\(account.alias): not signed out (\(error.code.rawValue)).", maxLength: 200))
                    continue
                }
                if all && outcome.alreadySignedOut { continue }
                let service = context.accountsService()
                documents.append(AccountDocument(service.summary(of: outcome.account, defaultAccount: defaultAccount)))
                // A confirmation, on stdout like every other command's.
                if outcome.alreadySignedOut {
                    lines.append(
                        ErrorPresenter.sanitize("\(outcome.account.alias) was already signed out.", maxLength: 200))
                    continue
                }
                lines.append(
                    ErrorPresenter.sanitize("Signed out of \(outcome.account.alias).", maxLength: 200)
                        + (outcome.serverSignedOut ? "" : " The server could not be told; the local session is gone."))
            }
            // `--all` passes over accounts already signed out: with none signed in it said nothing.
            if all && lines.isEmpty {
                lines.append(accounts.isEmpty ? "No accounts." : "Every account was already signed out.")
            }
            struct Document: Encodable { var accounts: [AccountDocument] }
            context.emit(json: Document(accounts: documents), human: lines.joined(separator: "\n"))
            if let firstError { throw firstError }
        }
    }
}
