//! The etcd v3 API messages the fake etcd reads and writes (`etcdserverpb`, from etcd's
//! `api/etcdserverpb/rpc.proto`): only the messages and fields of the RPCs served.

/// Every response's header.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResponseHeader {
    /// The cluster's id.
    #[prost(uint64, tag = "1")]
    pub cluster_id: u64,
    /// The id of the member answering.
    #[prost(uint64, tag = "2")]
    pub member_id: u64,
    /// The key-value store's revision.
    #[prost(int64, tag = "3")]
    pub revision: i64,
    /// The raft term.
    #[prost(uint64, tag = "4")]
    pub raft_term: u64,
}

/// `Cluster.MemberList` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemberListRequest {
    /// Read through consensus (clientv3 sets it by default).
    #[prost(bool, tag = "1")]
    pub linearizable: bool,
}

/// One member.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Member {
    /// Member id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Member name (the node name, as kubeadm names members).
    #[prost(string, tag = "2")]
    pub name: String,
    /// Peer URLs.
    #[prost(string, repeated, tag = "3")]
    pub peer_urls: Vec<String>,
    /// Client URLs.
    #[prost(string, repeated, tag = "4")]
    pub client_urls: Vec<String>,
    /// Whether it is a learner.
    #[prost(bool, tag = "5")]
    pub is_learner: bool,
}

/// `Cluster.MemberList` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemberListResponse {
    /// Header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The members.
    #[prost(message, repeated, tag = "2")]
    pub members: Vec<Member>,
}

/// `Cluster.MemberRemove` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemberRemoveRequest {
    /// The member to remove.
    #[prost(uint64, tag = "1")]
    pub id: u64,
}

/// `Cluster.MemberRemove` response: the members left.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemberRemoveResponse {
    /// Header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The members left.
    #[prost(message, repeated, tag = "2")]
    pub members: Vec<Member>,
}

/// `Maintenance.Status` request (no fields).
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusRequest {}

/// `Maintenance.Status` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusResponse {
    /// Header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The etcd version.
    #[prost(string, tag = "2")]
    pub version: String,
    /// Database size in bytes.
    #[prost(int64, tag = "3")]
    pub db_size: i64,
    /// The leader's member id.
    #[prost(uint64, tag = "4")]
    pub leader: u64,
    /// Raft index.
    #[prost(uint64, tag = "5")]
    pub raft_index: u64,
    /// Raft term.
    #[prost(uint64, tag = "6")]
    pub raft_term: u64,
    /// Raft applied index.
    #[prost(uint64, tag = "7")]
    pub raft_applied_index: u64,
    /// Errors the member reports.
    #[prost(string, repeated, tag = "8")]
    pub errors: Vec<String>,
    /// Database size in use.
    #[prost(int64, tag = "9")]
    pub db_size_in_use: i64,
    /// Whether the member is a learner.
    #[prost(bool, tag = "10")]
    pub is_learner: bool,
}

/// `Maintenance.Alarm` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AlarmRequest {
    /// 0 GET, 1 ACTIVATE, 2 DEACTIVATE.
    #[prost(int32, tag = "1")]
    pub action: i32,
    /// The member (0: all).
    #[prost(uint64, tag = "2")]
    pub member_id: u64,
    /// 0 NONE, 1 NOSPACE, 2 CORRUPT.
    #[prost(int32, tag = "3")]
    pub alarm: i32,
}

/// One raised alarm.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AlarmMember {
    /// The member.
    #[prost(uint64, tag = "1")]
    pub member_id: u64,
    /// The alarm type.
    #[prost(int32, tag = "2")]
    pub alarm: i32,
}

/// `Maintenance.Alarm` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AlarmResponse {
    /// Header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The alarms raised.
    #[prost(message, repeated, tag = "2")]
    pub alarms: Vec<AlarmMember>,
}

/// `Maintenance.MoveLeader` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MoveLeaderRequest {
    /// The member to lead.
    #[prost(uint64, tag = "1")]
    pub target_id: u64,
}

/// `Maintenance.MoveLeader` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MoveLeaderResponse {
    /// Header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
}
