//! scratch
use kube::CustomResourceExt;
fn main() {
    println!("{}", serde_yaml::to_string(&muster_crds::nodeclass::NodeClass::crd()).unwrap());
}
