// Entry point: parse the command line, run the command, exit with its code.
import BeaconCore
import DaemonCore
import SystemCalls

public enum BeacondMain {
    public static func main() -> Never {
        ignoreBrokenPipe()
        let args = Array(CommandLine.arguments.dropFirst())
        let code: ExitCode
        do {
            switch try CLI.parse(args) {
            case .help(let command):
                Output.out(CLI.help(command))
                code = .success
            case .version:
                Output.out("beacond \(beacondVersion)\n")
                code = .success
            case .checkConfig(let path, let keys): code = Tools.checkConfig(path: path, keys: keys)
            case .configSchema:
                Output.out(ConfigSchema.json)
                code = .success
            case .payload(let path, let format, let time): code = Tools.payload(path: path, format: format, time: time)
            case .genKey(let path): code = Tools.genKey(path: path)
            case .irk(let path, let beacon): code = ResolvingKeyCommand.run(configPath: path, beacon: beacon)
            case .genUUID(let count, let lower, let set, let replace):
                code = Tools.genUUID(count: count, lowercase: lower, setPath: set, replacing: replace)
            case .run(let options): code = Daemon.run(options)
            case .scan(let options): code = Scanner.run(options)
            case .status(let options): code = options.check ? AdapterCheck.run(options) : StatusCommand.status(options)
            case .reload(let options): code = StatusCommand.reload(options)
            }
        } catch {
            Output.err(error.rendered)
            code = .usage
        }
        exitProcess(code.rawValue)
    }
}
