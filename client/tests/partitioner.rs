//! The native client's key partitioner against librdkafka's `murmur2_random` (the Java
//! client's default for keyed records), called through librdkafka's own C function:
//! 10,000 random keys x partition counts 1..=64 must land on the same partition.

use rand::{Rng, SeedableRng};
use strand_client::partitioner::partition_for_key;

fn librdkafka(key: &[u8], partitions: i32) -> i32 {
    // SAFETY: librdkafka's murmur2_random reads only `key[..keylen]` when a key is given (the
    // topic handle and opaques are not touched on that path).
    unsafe {
        rdkafka_sys::bindings::rd_kafka_msg_partitioner_murmur2_random(
            std::ptr::null(),
            key.as_ptr().cast(),
            key.len(),
            partitions,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    }
}

#[test]
fn same_partition_as_librdkafka_murmur2_random_for_10000_keys() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut checked = 0;
    for i in 0..10_000 {
        let len = rng.gen_range(0..64);
        let mut key: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if i % 3 == 0 {
            key = format!("user-{i}").into_bytes(); // text keys too
        }
        for partitions in 1..=64 {
            assert_eq!(
                partition_for_key(&key, partitions),
                librdkafka(&key, partitions),
                "key {key:?}, {partitions} partitions"
            );
            checked += 1;
        }
    }
    println!("{checked} (key, partition count) pairs agree with librdkafka");
}
