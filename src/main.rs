fn main() {
    println!("lockbench");
}
