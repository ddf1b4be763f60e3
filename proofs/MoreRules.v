(** * More shape rules, sound at every instance: reductions over a static axis as list
    operations ([reduce_sound]) and the three-way broadcast of [where] ([where_sound]). They
    reuse [broadcast_sound]; [matmul] and the reductions are primitives of Lang.v. *)
From Coq Require Import List Arith String Lia.
From Kina Require Import Dims Types Rules Lang Instances Soundness.
Import ListNotations.

(** Reductions over a static axis [a] of a shape without a variadic group. *)
Definition remove_axis (s : shape) (a : nat) : shape :=
  Shape (group s) (firstn a (fixed s) ++ skipn (S a) (fixed s)).

Theorem reduce_sound : forall i s a,
  group s = None ->
  inst_shape i (remove_axis s a)
  = firstn a (inst_shape i s) ++ skipn (S a) (inst_shape i s).
Proof.
  intros i [g fs] a G; simpl in G; subst; unfold inst_shape, remove_axis.
  cbn [group fixed app]; rewrite map_app, firstn_map, skipn_map; reflexivity.
Qed.

(** [where c a b]: broadcasting over the three, [c] bool; the result dtype is the join of
    [a] and [b]; weak branches keep the result weak, as kinac's checker does (the dtype it
    meets fixes it, alone it becomes f32). *)
Definition c_where (c a b : cty) : option cty :=
  match c_dtype c, join_dtype (c_dtype a) (c_dtype b) with
  | DT Bool, Some d =>
      match c_broadcast (c_shape c) (c_shape a) with
      | Some s1 =>
          match c_broadcast s1 (c_shape b) with
          | Some s => Some (CTy d s (c_device a))
          | None => None
          end
      | None => None
      end
  | _, _ => None
  end.

Theorem where_sound : forall A i c a b d s1 s,
  shape_bcast A (ty_shape c) (ty_shape a) s1 -> shape_bcast A s1 (ty_shape b) s ->
  ty_dtype c = DT Bool -> join_dtype (ty_dtype a) (ty_dtype b) = Some d -> inst_ok A i ->
  exists t, c_where (inst_ty i c) (inst_ty i a) (inst_ty i b) = Some t
            /\ c_shape t = inst_shape i s.
Proof.
  intros A i c a b d s1 s H1 H2 Hc Hd Ok.
  unfold c_where; simpl; rewrite Hc; simpl.
  rewrite (join_dtype_inst A i _ _ d Ok Hd).
  rewrite (broadcast_sound A i _ _ _ H1 Ok), (broadcast_sound A i _ _ _ H2 Ok).
  eexists; split; reflexivity.
Qed.
