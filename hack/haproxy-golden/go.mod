module capd-rs/hack/haproxy-golden

go 1.23
