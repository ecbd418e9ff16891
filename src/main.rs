fn main() {
    println!("capd manager: not implemented yet");
}
