//! Prints `.env.example`, made from the table of settings
//! (`teneral_core::setting`): `cargo run --locked -p teneral-core --example
//! env-example > .env.example`.

fn main() {
    print!("{}", teneral_core::setting::example());
}
