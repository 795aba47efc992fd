use clap::Parser;

fn main() {
    let cli = zae_limiter::cli::Cli::parse();
    std::process::exit(zae_limiter::cli::run(cli));
}
