//! Prints the nodes of an imported ONNX model: `cargo run -p ordo-onnx --example onnx_summary -- model.onnx`.

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: onnx_summary <model.onnx>");
        std::process::exit(2);
    };
    let start = std::time::Instant::now();
    match ordo_onnx::import_file_with(&path, &ordo_onnx::ImportOptions::default()) {
        Ok(import) => {
            let elapsed = start.elapsed();
            for node in &import.graph.nodes {
                let outputs: Vec<String> = node.outputs.iter().map(ToString::to_string).collect();
                println!("{:<50} {:<12} {}", node.name, node.op.name(), outputs.join(" "));
            }
            println!("{:#?}\nimported in {elapsed:?}", import.report);
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
