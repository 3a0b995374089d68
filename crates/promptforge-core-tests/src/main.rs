//! `promptforge-core-tests [scenarios [NAME...]]`: the real-model scenario suite.
#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("scenarios") {
        args.remove(0);
    }
    if args.iter().any(|a| a == "-h" || a == "--help") {
        #[allow(clippy::print_stdout)]
        {
            println!("usage: promptforge-core-tests [scenarios [NAME...]]");
        }
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    match runtime.block_on(promptforge_core_tests::run_scenarios(&args)) {
        Ok((report, passed)) => {
            #[allow(clippy::print_stdout)]
            {
                print!("{report}");
            }
            if passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => fail(&e.to_string()),
    }
}

fn fail(message: &str) -> ExitCode {
    #[allow(clippy::print_stderr)]
    {
        eprintln!("promptforge-core-tests: {message}");
    }
    ExitCode::FAILURE
}
