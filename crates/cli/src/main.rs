//! `latlab`: a latency lab for game servers and network functions. The command line lives in
//! the `latlab_cli` library ([`latlab_cli::main`]), where the tests can read its flags.
#![forbid(unsafe_code)]

fn main() {
    latlab_cli::main()
}
