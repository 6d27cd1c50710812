import OStackCore
import PlatformKit

extension CommandContext {
    /// Builds the real dependencies from the process environment. The only place that does.
    public static func live(global: GlobalOptions) -> CommandContext {
        var global = global
        global.explicitJSON = global.json || global.format == .json
        global.json = global.wantsJSON
        let environment = ProcessEnvironment.current()
        let layout = FileLayout(
            environment: environment, userID: ProcessEnvironment.userID,
            // The password database only when HOME does not say (it costs an NSS lookup at every start).
            homeDirectory: environment["HOME"]?.hasPrefix("/") == true ? nil : ProcessEnvironment.passwordHomeDirectory)
        return CommandContext(
            global: global, environment: environment,
            terminal: Terminal(environment: environment, noColorFlag: global.noColor, format: global.format),
            layout: layout,
            makeAuthEnvironment: LiveDependencies.authEnvironment)
    }
}
